"""PyCIL's class-incremental protocol on CIFAR-100 (LAMDA-CL/PyCIL at the commit FML-bench pins), for the harness.

FML-bench's Continual_Learning_pycil runs PyCIL's iCaRL with ``shuffle: true`` and seed 1993: PyCIL's
``DataManager`` draws a class order with the legacy NumPy generator (``np.random.seed(1993)``, then
``np.random.permutation(100)``) and renumbers every label by its position in that order, so the base
session holds the first 50 classes of the order and each later session the next 10. The original then
cuts CIFAR-100's test set, already renumbered, per class in order 0..99: a ``RandomState(42)``
permutation of the class's test images, its first ``int(0.3 * n)`` for val, the rest for the test.

After each session PyCIL scores the model on the test images of every class seen so far; its top-1
accuracy is a percentage rounded to two decimals (``utils.toolkit.accuracy``), and the trainer's
"Average Accuracy" is the plain mean of those per-session figures. The original reports it divided by 100.
"""

from __future__ import annotations

import numpy as np

NUM_CLASSES = 100
CLASS_ORDER_SEED = 1993
INIT_CLASSES, INCREMENT = 50, 10
SPLIT_SEED, VAL_RATIO = 42, 0.3


def class_order(num_classes: int = NUM_CLASSES, seed: int = CLASS_ORDER_SEED) -> np.ndarray:
    """The original labels in session order: ``order[k]`` is the class PyCIL numbers ``k``."""
    return np.random.RandomState(seed).permutation(num_classes)


def renumber(labels: np.ndarray, order: np.ndarray) -> np.ndarray:
    """PyCIL's ``_map_new_class_index``: each label becomes its position in ``order``."""
    position = np.empty(len(order), dtype=np.int64)
    position[np.asarray(order)] = np.arange(len(order))
    return position[np.asarray(labels, dtype=np.int64)]


def session_sizes(num_classes: int = NUM_CLASSES, init_classes: int = INIT_CLASSES,
                  increment: int = INCREMENT) -> list[int]:
    """How many new classes each session brings, as ``DataManager`` splits them (a short last one if needed)."""
    sizes = [init_classes]
    while sum(sizes) + increment < num_classes:
        sizes.append(increment)
    if num_classes > sum(sizes):
        sizes.append(num_classes - sum(sizes))
    return sizes


def val_test_split(renumbered_test_labels: np.ndarray, seed: int = SPLIT_SEED,
                   val_ratio: float = VAL_RATIO) -> tuple[np.ndarray, np.ndarray]:
    """(val, test) positions in the test set: per renumbered class, a shared generator's permutation of
    its images, the first ``int(val_ratio * n)`` to val; both lists in class order, as the original builds them."""
    rng = np.random.RandomState(seed)
    val, test = [], []
    for label in range(NUM_CLASSES):
        members = rng.permutation(np.flatnonzero(renumbered_test_labels == label))
        cut = int(val_ratio * len(members))
        val.extend(members[:cut])
        test.extend(members[cut:])
    return np.asarray(val, dtype=np.int64), np.asarray(test, dtype=np.int64)


def session_accuracies(predictions: list[np.ndarray], labels: np.ndarray, sizes: list[int]) -> list[float]:
    """Per session, PyCIL's top-1 accuracy (a percentage, two decimals) on the images of the classes seen
    so far. ``predictions[t]`` labels every scored image (renumbered classes); the others are ignored."""
    if len(predictions) != len(sizes):
        raise ValueError(f"{len(predictions)} sessions of predictions, the protocol has {len(sizes)}")
    accuracies = []
    for pred, seen in zip(predictions, np.cumsum(sizes)):
        scored = labels < seen
        if not scored.any():
            raise ValueError(f"no scored image belongs to the first {seen} classes")
        correct = int((pred[scored] == labels[scored]).sum())
        accuracies.append(float(np.around(correct * 100 / int(scored.sum()), decimals=2)))
    return accuracies


def average_incremental_accuracy(accuracies: list[float]) -> float:
    """The original's avg_incremental_acc: the mean per-session accuracy, as a fraction."""
    return sum(accuracies) / len(accuracies) / 100.0
