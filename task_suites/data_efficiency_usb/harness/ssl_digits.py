"""The semi-supervised split of sklearn's 8x8 digits, shared by prepare.py and evaluate.py.

USB's CIFAR-100 setting keeps 2 labels per class (200 labels) and hides the labels of the rest of the
training set. Here: a hidden test set is carved first; from the visible pool, LABELS_PER_CLASS examples
per class keep their label, the others form the unlabeled pool (their labels stay in the harness-private
folder, where the evaluator uses them to score the validation split). The seed lives only in harness/.
"""

from __future__ import annotations

import numpy as np
from sklearn.datasets import load_digits

SEED = 20240704
TEST_FRACTION = 0.27
LABELS_PER_CLASS = 2
NUM_CLASSES = 10


def carve() -> dict[str, np.ndarray]:
    """labeled_X/labeled_y (the few labels), unlabeled_X/unlabeled_y (labels hidden), test_X/test_y.

    X are uint8 (n, 8, 8) pixel intensities 0..16, y int64 class labels.
    """
    digits = load_digits()
    X, y = digits.images.astype(np.uint8), digits.target.astype(np.int64)
    rng = np.random.default_rng(SEED)
    order = rng.permutation(len(y))
    n_test = int(round(TEST_FRACTION * len(y)))
    test_idx, visible_idx = np.sort(order[:n_test]), np.sort(order[n_test:])
    labeled = np.sort(np.concatenate([
        rng.choice(visible_idx[y[visible_idx] == c], LABELS_PER_CLASS, replace=False) for c in range(NUM_CLASSES)
    ]))
    unlabeled = np.setdiff1d(visible_idx, labeled)
    return {
        "labeled_X": X[labeled], "labeled_y": y[labeled],
        "unlabeled_X": X[unlabeled], "unlabeled_y": y[unlabeled],
        "test_X": X[test_idx], "test_y": y[test_idx],
    }
