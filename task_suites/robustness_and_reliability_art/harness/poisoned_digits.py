"""The data of the robustness_and_reliability_art task: poisoned 8x8 digits, one set per backdoor.

The original poisons a 7,500-image sample of MNIST (plus 3,000 test images in its visible pool) and
scores on 7,000 hidden MNIST test images. Here sklearn's 1,797 8x8 digits stand in for MNIST: 30%
are carved out (fixed seed) as the hidden test images, the rest is the visible pool. For each of the
five backdoors the harness poisons the visible pool (the training data the defence gets, with the
poisons unmarked) and, separately, the hidden test images (to measure clean accuracy and attack
success). Nothing of this file, its seeds or its triggers, reaches the workspace.
"""

from __future__ import annotations

import numpy as np
from sklearn.datasets import load_digits

from backdoors import BACKDOORS, poison

TEST_SEED = 31_337  # carves the hidden test digits
TEST_FRACTION = 0.3
POOL_SEED = 8_100  # poisons the visible pool, one stream per backdoor
TEST_POISON_SEED = 52_600  # poisons the hidden test digits, one stream per backdoor
SHUFFLE_SEED = 404

N_BACKDOORS = len(BACKDOORS)


def _shuffled(seed: int, *arrays: np.ndarray) -> list[np.ndarray]:
    order = np.random.default_rng(seed).permutation(len(arrays[0]))
    return [a[order] for a in arrays]


def load_sets() -> dict[str, np.ndarray]:
    """Per backdoor i: ``pool{i}_X/_y/_is_poison`` (the visible, poisoned training pool) and
    ``test{i}_X/_y/_is_poison`` (the hidden test inputs). Images are uint8 (N, 8, 8), pixels 0..16;
    ``_y`` holds the labels as poisoned (the attack's target class for a triggered image).

    A ``full`` profile replaces this function (MNIST) and keeps the keys.
    """
    digits = load_digits()
    X = digits.images.astype(np.uint8)
    y = digits.target.astype(np.int64)
    order = np.random.default_rng(TEST_SEED).permutation(len(X))
    n_test = int(round(TEST_FRACTION * len(X)))
    test_idx, visible_idx = np.sort(order[:n_test]), np.sort(order[n_test:])

    sets: dict[str, np.ndarray] = {}
    for i, name in enumerate(BACKDOORS):
        pool = poison(X[visible_idx], y[visible_idx], name, POOL_SEED + 1000 * i)
        test = poison(X[test_idx], y[test_idx], name, TEST_POISON_SEED + 1000 * i)
        for prefix, arrays in (("pool", pool), ("test", test)):
            x_s, y_s, flag_s = _shuffled(SHUFFLE_SEED + i, *arrays)
            sets[f"{prefix}{i}_X"], sets[f"{prefix}{i}_y"], sets[f"{prefix}{i}_is_poison"] = x_s, y_s, flag_s
    return sets
