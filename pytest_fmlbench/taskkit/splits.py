"""The original FML-bench's split rule for image tasks: a hidden test part carved first, with a fixed seed.

``hidden_test(n, fraction, seed)`` is numpy's legacy ``RandomState(seed).permutation(n)``: its first
``int(fraction * n)`` indices are the hidden test, the rest the visible pool. The visible pool is cut
into train and val by the agent's ``split_config.json`` with ``RandomState(val_seed)`` and
``int(val_ratio * n_visible)`` validation examples, as in the original's harnesses.
"""

from __future__ import annotations

import numpy as np


def hidden_test(n: int, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    order = np.random.RandomState(seed).permutation(n)
    n_test = int(fraction * n)
    return order[:n_test], order[n_test:]


def train_val(n_visible: int, val_ratio: float, val_seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(train, val) positions within the visible pool."""
    order = np.random.RandomState(val_seed).permutation(n_visible)
    n_val = int(val_ratio * n_visible)
    return order[n_val:], order[:n_val]
