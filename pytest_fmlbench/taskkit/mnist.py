"""MNIST as Keras publishes it (``mnist.npz``: ``x_train`` 60000 x 28 x 28, ``y_train``, ``x_test``,
``y_test``, uint8), read without unpickling, and a small stand-in in the same format for ``--scale=smoke``."""

from __future__ import annotations

from pathlib import Path

import numpy as np

KEYS = ("x_train", "y_train", "x_test", "y_test")
FIXTURE_PER_PART = {"train": 60, "test": 30}


def read(archive: Path) -> tuple[np.ndarray, np.ndarray]:
    """(images N x 28 x 28 uint8, labels N int64): the training digits, then the test digits."""
    with np.load(archive, allow_pickle=False) as arrays:
        missing = [key for key in KEYS if key not in arrays.files]
        if missing:
            raise ValueError(f"{archive.name}: no {', '.join(missing)}")
        images = np.concatenate([arrays["x_train"], arrays["x_test"]]).astype(np.uint8, copy=False)
        labels = np.concatenate([arrays["y_train"], arrays["y_test"]]).astype(np.int64)
    if images.shape[1:] != (28, 28) or len(images) != len(labels):
        raise ValueError(f"{archive.name}: images {images.shape} and labels {labels.shape} are not MNIST's")
    return images, labels


def write_fixture(path: Path) -> None:
    """A few digits per part: a bright bar whose row tells the digit, on noise (deterministic)."""
    rng = np.random.default_rng(28)
    arrays = {}
    for part, n in FIXTURE_PER_PART.items():
        labels = (np.arange(n) % 10).astype(np.uint8)
        rng.shuffle(labels)
        images = rng.integers(0, 64, size=(n, 28, 28)).astype(np.uint8)
        for image, label in zip(images, labels):
            image[2 + 2 * int(label):4 + 2 * int(label), 4:24] = 255
        arrays[f"x_{part}"], arrays[f"y_{part}"] = images, labels
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp.npz")
    np.savez_compressed(tmp, **arrays)
    tmp.replace(path)
