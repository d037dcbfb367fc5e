"""Split MNIST in the class-incremental scenario, as FML-bench's Continual_Learning_continual_learning scores it
(GMvandeVen/continual-learning at the commit FML-bench pins), for the harness.

Five contexts of two digits each, {0,1}, {2,3}, {4,5}, {6,7}, {8,9}: with the repository's default seed 0 its
``get_context_set`` keeps the digits in order (no class permutation). A context's test set is every MNIST test
image of its two digits, in the order of the test set; the original cuts it with ``RandomState(42 + context)``
(contexts counted from 0): the first ``int(0.3 * n)`` positions of that generator's permutation are val, the
rest test. After the last context the final model labels every scored image with one of the ten digits; each
context's accuracy is the fraction of its images labelled right, and ``average_acc`` is the plain mean of the
five accuracies (not the accuracy over the pooled images).
"""

from __future__ import annotations

import numpy as np

NUM_CLASSES = 10
CONTEXTS = 5
CLASSES_PER_CONTEXT = NUM_CLASSES // CONTEXTS
SPLIT_SEED, VAL_RATIO = 42, 0.3


def context_of(labels: np.ndarray) -> np.ndarray:
    """The context (0..4) each digit belongs to."""
    return np.asarray(labels, dtype=np.int64) // CLASSES_PER_CONTEXT


def val_test_split(test_labels: np.ndarray, seed: int = SPLIT_SEED,
                   val_ratio: float = VAL_RATIO) -> tuple[np.ndarray, np.ndarray]:
    """(val, test) positions in MNIST's test set, context after context: each context's images in test-set order,
    cut by its own generator as the original's ``split_dataset_indices`` cuts them."""
    contexts = context_of(test_labels)
    val, test = [], []
    for context in range(CONTEXTS):
        members = np.flatnonzero(contexts == context)
        order = np.random.RandomState(seed + context).permutation(len(members))
        n_val = int(val_ratio * len(members))
        val.append(members[order[:n_val]])
        test.append(members[order[n_val:]])
    return np.concatenate(val), np.concatenate(test)


def context_accuracies(predictions: np.ndarray, labels: np.ndarray) -> list[float]:
    """Per context, the fraction of its images whose predicted digit is the true one."""
    predictions, labels = np.asarray(predictions), np.asarray(labels)
    contexts = context_of(labels)
    accuracies = []
    for context in range(CONTEXTS):
        members = contexts == context
        if not members.any():
            raise ValueError(f"no scored image of context {context}")
        accuracies.append(float(np.mean(predictions[members] == labels[members])))
    return accuracies


def average_accuracy(predictions: np.ndarray, labels: np.ndarray) -> float:
    """The original's average_acc: the mean over the five contexts of each context's accuracy."""
    return sum(context_accuracies(predictions, labels)) / CONTEXTS
