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
# 3000 hidden images: the test accuracy's sampling error is 0.008 (0.014 with 1000), small beside what a
# better method gains
N_TEST = 3000
POOL_SEED = 52_904_118
TEST_SEED = 38_227_560


def load_pool(with_test: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(visible_X, visible_y, test_X, test_y); X uint8 (N, 16, 16, 3), y int64 class ids. Without the test
    set (the val split's scoring, prepare), test_X and test_y are empty: rendering it is most of the cost."""
    visible_X, visible_y = generate(N_VISIBLE, N_CLASSES, POOL_SEED)
    if not with_test:
        return visible_X, visible_y, visible_X[:0], visible_y[:0]
    test_X, test_y = generate(N_TEST, N_CLASSES, TEST_SEED)
    return visible_X, visible_y, test_X, test_y
