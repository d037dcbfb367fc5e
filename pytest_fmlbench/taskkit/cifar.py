"""CIFAR-10/100 from the "python version" archive (``cifar-10-python.tar.gz``), read without extracting.

The archive holds pickled batches (``data_batch_1``..``5`` and ``test_batch`` for CIFAR-10, ``train``
and ``test`` for CIFAR-100), each a dict with ``b'data'`` (N x 3072 uint8, channels first) and
``b'labels'`` / ``b'fine_labels'``. The archive is read only after its SHA-256 was checked (or, at
smoke scale, it is a fixture this package wrote), so unpickling it runs nothing foreign.
"""

from __future__ import annotations

import pickle
import tarfile
from pathlib import Path

import numpy as np

LAYOUT = {
    "cifar10": ("cifar-10-batches-py", [f"data_batch_{i}" for i in range(1, 6)], ["test_batch"], b"labels"),
    "cifar100": ("cifar-100-python", ["train"], ["test"], b"fine_labels"),
}


def read(archive: Path, variant: str, part: str) -> tuple[np.ndarray, np.ndarray]:
    """(images N x 32 x 32 x 3 uint8, labels N int64) of ``part`` ("train" or "test")."""
    folder, train, test, label_key = LAYOUT[variant]
    images, labels = [], []
    with tarfile.open(archive, "r:gz") as tar:
        for member in train if part == "train" else test:
            handle = tar.extractfile(f"{folder}/{member}")
            if handle is None:
                raise ValueError(f"{archive.name}: {folder}/{member} is not a file")
            batch = pickle.load(handle, encoding="bytes")
            images.append(np.asarray(batch[b"data"], dtype=np.uint8).reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1))
            labels.append(np.asarray(batch[label_key], dtype=np.int64))
    return np.concatenate(images), np.concatenate(labels)
