"""The hidden-test carve of sklearn's digits and the split-digits protocol, shared by prepare.py and
evaluate.py.

The seed lives only here (harness/ is never copied into the workspace), so nothing the agent edits can
move an example between the hidden test set and the visible pool.
"""

from __future__ import annotations

import numpy as np
from sklearn.datasets import load_digits

TEST_SEED = 20250917
TEST_FRACTION = 0.3  # the original scores 70% of MNIST's test set; here 30% of the digits are hidden
NUM_CLASSES = 10
# split-MNIST's contexts, in the fixed order the original uses: {0,1}, {2,3}, ..., {8,9}
CONTEXTS = [(0, 1), (2, 3), (4, 5), (6, 7), (8, 9)]
# the baseline network's parameter count (64-400-400-10 MLP); the original caps models at twice it
BASELINE_PARAMETERS = 64 * 400 + 400 + 400 * 400 + 400 + 400 * 10 + 10
MAX_PARAMETERS = 2 * BASELINE_PARAMETERS


def load() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(visible_X, visible_y, test_X, test_y); X as uint8 (N, 64) pixel intensities 0..16.

    A 'full' profile would replace this function (MNIST, 28x28)."""
    digits = load_digits()
    X = digits.data.astype(np.uint8)
    y = digits.target.astype(np.int64)
    order = np.random.default_rng(TEST_SEED).permutation(len(X))
    n_test = int(round(TEST_FRACTION * len(X)))
    test_idx, visible_idx = np.sort(order[:n_test]), np.sort(order[n_test:])
    return X[visible_idx], y[visible_idx], X[test_idx], y[test_idx]
