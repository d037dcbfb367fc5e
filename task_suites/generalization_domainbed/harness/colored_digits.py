"""ColoredMNIST (Arjovsky et al. 2019, as built by DomainBed) on sklearn's 8x8 digits.

DomainBed shuffles MNIST, deals it round-robin into three environments and, in each, gives every
image a binary label (digit < 5), flips that label with probability 0.25, and colours the image red
or green: the colour equals the noisy label, flipped with the environment's probability e. With
e = 0.1, 0.2, 0.9 the colour predicts the label 90% / 80% of the time in the two training
environments and only 10% in the third, where the correlation is reversed. The shape predicts it
75% of the time everywhere. Environment 2 is the held-out test environment.

The same recipe is applied here to the 1,797 digits that ship with scikit-learn (MNIST cannot be
downloaded). About 600 digits per environment make a held-out score too coarse to rank methods, so
each environment holds COPIES coloured copies of each of its digits, every copy with its own label
noise and its own colour draw: the environments' digits stay disjoint, and the label and colour
statistics are DomainBed's. The held-out environment is cut by digit (all copies of a digit on one
side) into a validation part and a test part. The seed lives only in harness/, so nothing the agent
edits can move an image between environments or splits, or change a label or a colour.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from sklearn.datasets import load_digits

from layout import COLOR_FLIP, NUM_CLASSES, TEST_ENV, TRAIN_ENVS, VAL_FRACTION  # noqa: F401  (re-exported)

SEED = 20240521
LABEL_NOISE = 0.25
COPIES = 8


class Environment(NamedTuple):
    X: np.ndarray  # uint8 (n, 2, 8, 8), pixel values 0..16
    y: np.ndarray  # int64 (n,)
    digit: np.ndarray  # int64 (n,): which of the environment's source digits each row is a copy of


def color_environment(images: np.ndarray, digits: np.ndarray, color_flip: float,
                      rng: np.random.Generator) -> Environment:
    """COPIES coloured, label-noised copies of every digit of one environment, copy after copy."""
    n_digits = len(digits)
    source = np.tile(np.arange(n_digits), COPIES)
    n = len(source)
    labels = (digits[source] < 5).astype(np.int64) ^ (rng.random(n) < LABEL_NOISE)
    colors = labels ^ (rng.random(n) < color_flip)
    X = np.repeat(images[source].reshape(n, 1, 8, 8), 2, axis=1)
    X[np.arange(n), 1 - colors] = 0  # keep only the channel of the image's colour
    return Environment(X.astype(np.uint8), labels.astype(np.int64), source.astype(np.int64))


def environments() -> list[Environment]:
    """The three environments, in DomainBed's order."""
    digits = load_digits()
    rng = np.random.default_rng(SEED)
    order = rng.permutation(len(digits.target))
    images, targets = digits.images.astype(np.uint8)[order], digits.target[order]
    n_env = len(COLOR_FLIP)
    return [color_environment(images[e::n_env], targets[e::n_env], COLOR_FLIP[e], rng) for e in range(n_env)]


def held_out_split(env: Environment) -> tuple[np.ndarray, np.ndarray]:
    """(validation rows, test rows) of the held-out environment: VAL_FRACTION of its digits, all their
    copies, are validation; the other digits' copies are test, so no image is on both sides."""
    n_digits = int(env.digit.max()) + 1
    val_digits = np.random.default_rng(SEED + 1).permutation(n_digits)[:int(round(VAL_FRACTION * n_digits))]
    is_val = np.isin(env.digit, val_digits)
    return np.flatnonzero(is_val), np.flatnonzero(~is_val)
