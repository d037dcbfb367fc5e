"""SVHN's cropped digits as the Stanford site publishes them (``test_32x32.mat``): read, and a fixture.

The file is a MATLAB 5 mat file (zlib-compressed variables) with ``X``, uint8 (32, 32, 3, N) with the
image index last, and ``y``, (N, 1) labels 1..10 where 10 is the digit 0; torchvision's ``SVHN`` reads
it with ``scipy.io.loadmat`` and maps 10 to 0. ``loadmat`` never runs code from the file.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np

SIDE = 32
# the fixture: a few batches of far-OOD inputs for a smoke run's test
FIXTURE_IMAGES = 20
HEADER_TEXT = 116  # a MATLAB 5 file opens with 116 bytes of text
FIXTURE_HEADER = b"MATLAB 5.0 MAT-file, pytest-fmlbench SVHN fixture"


def read(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """(images uint8 (N, 32, 32, 3), labels int64 (N,) in 0..9), in the file's order."""
    from scipy.io import loadmat

    content = loadmat(path, variable_names=("X", "y"))
    if "X" not in content or "y" not in content:
        raise ValueError(f"{path.name}: no X and y in the file")
    x, y = content["X"], np.asarray(content["y"]).reshape(-1)
    if x.dtype != np.uint8 or x.ndim != 4 or x.shape[:3] != (SIDE, SIDE, 3) or len(y) != x.shape[3]:
        raise ValueError(f"{path.name}: X {x.dtype}{x.shape} / y {y.shape} are not SVHN's layout")
    return np.ascontiguousarray(x.transpose(3, 0, 1, 2)), y.astype(np.int64) % 10


def _house_numbers(rng: np.random.Generator, digits: np.ndarray) -> np.ndarray:
    """(32, 32, 3, N): a bright vertical bar whose column depends on the digit, on a coloured noisy ground."""
    images = rng.integers(0, 120, size=(SIDE, SIDE, 3, len(digits))).astype(np.uint8)
    for i, digit in enumerate(digits):
        column = 4 + 2 * int(digit)
        images[6:26, column:column + 3, :, i] = 240
    return images


def write_fixture(path: Path) -> None:
    """A small ``test_32x32.mat`` in SVHN's layout (X last-indexed, y 1..10 as uint8), deterministic."""
    from scipy.io import savemat

    rng = np.random.default_rng(32)
    digits = np.arange(FIXTURE_IMAGES) % 10
    rng.shuffle(digits)
    labels = np.where(digits == 0, 10, digits).astype(np.uint8).reshape(-1, 1)
    buffer = io.BytesIO()
    savemat(buffer, {"X": _house_numbers(rng, digits), "y": labels}, do_compression=True, format="5",
            oned_as="column")
    content = bytearray(buffer.getvalue())
    # scipy dates the header's 116-byte text; a fixed text gives the same fixture the same bytes
    content[:HEADER_TEXT] = FIXTURE_HEADER.ljust(HEADER_TEXT)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(bytes(content))
    tmp.replace(path)
