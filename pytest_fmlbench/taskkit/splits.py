"""The original FML-bench's hidden test split for image tasks: carved first, with a fixed seed.

``RandomState(seed).permutation(n)``: its first ``int(fraction * n)`` indices are the hidden test, the
rest the visible pool, in that permuted order (the agent's ``split_config.json`` then cuts the pool
with ``evalkit.original_split_indices``, as the original's harnesses do).
"""

from __future__ import annotations

import numpy as np


def hidden_test(n: int, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(hidden test indices, visible pool indices) into the ``n`` examples."""
    order = np.random.RandomState(seed).permutation(n)
    n_test = int(fraction * n)
    return order[:n_test], order[n_test:]
