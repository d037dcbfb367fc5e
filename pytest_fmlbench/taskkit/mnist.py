"""MNIST as Keras publishes it (``mnist.npz``), the file ART's ``load_mnist`` downloads: read, and a fixture.

The archive is a NumPy ``.npz`` with four arrays: ``x_train`` (60000 x 28 x 28 uint8), ``y_train``
(60000 uint8), ``x_test`` (10000 x 28 x 28 uint8), ``y_test`` (10000 uint8). It is read with
``allow_pickle=False``: nothing in it can run code.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np

KEYS = ("x_train", "y_train", "x_test", "y_test")
SIDE = 28
# the fixture: enough images per class for every split and poisoning step of a smoke run
FIXTURE_TRAIN, FIXTURE_TEST = 600, 200


def read(archive: Path) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """``((x_train, y_train), (x_test, y_test))``: images uint8 (N, 28, 28), labels int64 (N,)."""
    with np.load(archive, allow_pickle=False) as npz:
        missing = [key for key in KEYS if key not in npz.files]
        if missing:
            raise ValueError(f"{archive.name}: no {', '.join(missing)} in the archive")
        arrays = {key: npz[key] for key in KEYS}
    for part in ("train", "test"):
        x, y = arrays[f"x_{part}"], arrays[f"y_{part}"]
        if x.dtype != np.uint8 or x.ndim != 3 or x.shape[1:] != (SIDE, SIDE) or y.shape != (len(x),):
            raise ValueError(f"{archive.name}: x_{part} {x.dtype}{x.shape} / y_{part} {y.shape} are not MNIST's layout")
    return ((arrays["x_train"], arrays["y_train"].astype(np.int64)),
            (arrays["x_test"], arrays["y_test"].astype(np.int64)))


def _digits(rng: np.random.Generator, labels: np.ndarray) -> np.ndarray:
    """A bright stroke whose row depends on the class, on a dark noisy background."""
    images = rng.integers(0, 40, size=(len(labels), SIDE, SIDE)).astype(np.uint8)
    for i, label in enumerate(labels):
        row = 4 + 2 * int(label)
        images[i, row:row + 2, 6:22] = 230
    return images


def write_fixture(path: Path) -> None:
    """A small ``mnist.npz`` in Keras's layout (uint8 arrays under the same four keys), deterministic."""
    rng = np.random.default_rng(28)
    y_train = (np.arange(FIXTURE_TRAIN) % 10).astype(np.uint8)
    y_test = (np.arange(FIXTURE_TEST) % 10).astype(np.uint8)
    rng.shuffle(y_train)
    rng.shuffle(y_test)
    arrays = {"x_train": _digits(rng, y_train), "y_train": y_train, "x_test": _digits(rng, y_test), "y_test": y_test}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    # what np.savez writes, with fixed member dates so that the same fixture has the same bytes
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_STORED) as archive:
        for key, array in arrays.items():
            with archive.open(zipfile.ZipInfo(f"{key}.npy", date_time=(1980, 1, 1, 0, 0, 0)), "w") as member:
                np.lib.format.write_array(member, array, allow_pickle=False)
    tmp.replace(path)


def read_all(archive: Path) -> tuple[np.ndarray, np.ndarray]:
    """(images, labels): the training digits, then the test digits (DomainBed's MNIST datasets take both)."""
    (x_train, y_train), (x_test, y_test) = read(archive)
    return np.concatenate([x_train, x_test]), np.concatenate([y_train, y_test])
