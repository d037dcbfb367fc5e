"""The task's images: the visible pool and the hidden test set (the one function a `full` profile,
with CIFAR-100 on disk, would replace). 20 classes with 150 visible images each stand in for
CIFAR-100's 100 classes: more classes, fewer images per class, finer distinctions than the
10-class sister task.

Nothing here is written next to the workspace except the visible images (without labels): the
evaluator regenerates labels and hidden-test images from these seeds, which live only in harness/.
"""

from __future__ import annotations

import numpy as np

from pytest_fmlbench.taskkit.shapes import generate

N_CLASSES = 20
N_VISIBLE = 3000
N_TEST = 1000
POOL_SEED = 52_904_118
TEST_SEED = 38_227_560


def load_pool() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(visible_X, visible_y, test_X, test_y); X uint8 (N, 16, 16, 3), y int64 class ids."""
    images, labels = generate(N_VISIBLE + N_TEST, N_CLASSES, POOL_SEED)
    order = np.random.default_rng(TEST_SEED).permutation(len(images))
    test_idx, visible_idx = np.sort(order[:N_TEST]), np.sort(order[N_TEST:])
    return images[visible_idx], labels[visible_idx], images[test_idx], labels[test_idx]
