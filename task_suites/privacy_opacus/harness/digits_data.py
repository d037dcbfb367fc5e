"""The hidden-test carve of sklearn's digits, shared by prepare.py and evaluate.py.

The seed lives only here (harness/ is never copied into the workspace), so nothing the agent edits can
move an example between the hidden test set and the visible pool.
"""

from __future__ import annotations

import numpy as np
from sklearn.datasets import load_digits

TEST_SEED = 20250917
TEST_FRACTION = 0.27
NUM_CLASSES = 10


def carve() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(visible_X, visible_y, test_X, test_y); X as uint8 (N, 64) pixel intensities in 0..16."""
    digits = load_digits()
    X = digits.data.astype(np.uint8)
    y = digits.target.astype(np.int64)
    order = np.random.default_rng(TEST_SEED).permutation(len(X))
    n_test = int(round(TEST_FRACTION * len(X)))
    # sorted indices keep the on-disk order independent of the permutation's internals
    test_idx, visible_idx = np.sort(order[:n_test]), np.sort(order[n_test:])
    return X[visible_idx], y[visible_idx], X[test_idx], y[test_idx]
