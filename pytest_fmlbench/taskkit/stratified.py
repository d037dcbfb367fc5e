"""A per-class cut of a labelled set, as some of the original FML-bench's harnesses carve their hidden test.

One ``RandomState(seed)`` serves every class in turn, in class order: each class's indices (ascending) are
permuted by it, and the first ``int(fraction * count)`` of them go to the first part, the rest to the second.
Both parts list their indices class by class, in that permuted order. The draws of one class depend on every
class before it, so the classes must be visited exactly as the original does (0, 1, ..., num_classes - 1).
"""

from __future__ import annotations

import numpy as np


def per_class_split(labels: np.ndarray, fraction: float, seed: int, num_classes: int) -> tuple[np.ndarray, np.ndarray]:
    """(the first ``fraction`` of every class, the rest of every class): indices into ``labels``."""
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"fraction must lie in [0, 1], got {fraction}")
    rng = np.random.RandomState(seed)
    first, rest = [], []
    for label in range(num_classes):
        members = rng.permutation(np.flatnonzero(labels == label))
        cut = int(fraction * len(members))
        first.append(members[:cut])
        rest.append(members[cut:])
    return np.concatenate(first).astype(np.int64), np.concatenate(rest).astype(np.int64)
