"""ColoredMNIST (Arjovsky et al. 2019, as built by DomainBed) on sklearn's 8x8 digits.

DomainBed shuffles MNIST, deals it round-robin into three environments and, in each, gives every
image a binary label (digit < 5), flips that label with probability 0.25, and colours the image red
or green: the colour equals the noisy label, flipped with the environment's probability e. With
e = 0.1, 0.2, 0.9 the colour predicts the label 90% / 80% of the time in the two training
environments and only 10% in the third, where the correlation is reversed. The shape predicts it
75% of the time everywhere. Environment 2 is the held-out test environment.

The same recipe is applied here to the 1,797 digits that ship with scikit-learn (MNIST cannot be
downloaded). The seed lives only in harness/, so nothing the agent edits can move an image between
environments or change a label or a colour.
"""

from __future__ import annotations

import numpy as np
from sklearn.datasets import load_digits

from layout import COLOR_FLIP, NUM_CLASSES, TEST_ENV, TRAIN_ENVS  # noqa: F401  (re-exported)

SEED = 20240521
LABEL_NOISE = 0.25


def color_environment(images: np.ndarray, digits: np.ndarray, color_flip: float,
                      rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(X uint8 (n, 2, 8, 8) with pixel values 0..16, y int64 (n,)) for one environment."""
    n = len(digits)
    labels = (digits < 5).astype(np.int64) ^ (rng.random(n) < LABEL_NOISE)
    colors = labels ^ (rng.random(n) < color_flip)
    X = np.repeat(images.reshape(n, 1, 8, 8), 2, axis=1)
    X[np.arange(n), 1 - colors] = 0  # keep only the channel of the image's colour
    return X.astype(np.uint8), labels.astype(np.int64)


def environments() -> list[tuple[np.ndarray, np.ndarray]]:
    """The three environments, each (X, y), in DomainBed's order."""
    digits = load_digits()
    rng = np.random.default_rng(SEED)
    order = rng.permutation(len(digits.target))
    images, targets = digits.images.astype(np.uint8)[order], digits.target[order]
    n_env = len(COLOR_FLIP)
    return [color_environment(images[e::n_env], targets[e::n_env], COLOR_FLIP[e], rng) for e in range(n_env)]
