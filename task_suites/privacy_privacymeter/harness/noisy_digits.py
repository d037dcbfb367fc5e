"""The data of the privacy_privacymeter task: sklearn's 8x8 digits, each image with its own fixed noise.

The original audits WRN-28-2 models trained on CIFAR-10: they fit their training images perfectly but
reach about 61% on fresh ones, and that gap is what membership inference feeds on. Clean 8x8 digits are
so easy that a small CNN generalises almost perfectly and leaks little, so every image here carries its
own Gaussian pixel noise (sigma 0.4 on intensities scaled to [0, 1], drawn once with a fixed seed and
clipped): a small CNN then fits its 350 training images perfectly and reaches about 62% on held-out
ones, the original's regime.

The 1,797 images are cut once, with seeds that live only in harness/, into
  members      350  the training set the experiment gets (data/), the audit's members;
  val_non      350  hidden non-members of the val audit (and its utility set);
  test_non     350  hidden non-members of the final test audit (and its utility set);
  population   747  hidden population data: RMIA compares each audited point against them.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import NamedTuple

import numpy as np

NOISE_SEED = 4_017_2024
CARVE_SEED = 90_155_131
NOISE_SIGMA = 0.4
SIZES = {"members": 350, "val_non": 350, "test_non": 350}  # the rest is the population


class Part(NamedTuple):
    X: np.ndarray  # float32 (n, 1, 8, 8) in [0, 1]
    y: np.ndarray  # int64 (n,)


def _digits() -> tuple[np.ndarray, np.ndarray]:
    """sklearn's digits (what load_digits returns), read from the file scikit-learn ships: importing
    sklearn.datasets would cost every harness process more than a second."""
    package = importlib.util.find_spec("sklearn").submodule_search_locations[0]
    table = np.loadtxt(Path(package) / "datasets" / "data" / "digits.csv.gz", delimiter=",")
    return table[:, :-1], table[:, -1].astype(np.int64)


def noisy_digits() -> Part:
    pixels, target = _digits()
    clean = pixels / 16.0
    noisy = np.clip(clean + np.random.default_rng(NOISE_SEED).normal(0.0, NOISE_SIGMA, clean.shape), 0.0, 1.0)
    return Part(noisy.astype(np.float32).reshape(-1, 1, 8, 8), target)


def carve() -> dict[str, Part]:
    """members, val_non, test_non and population, each in ascending original order."""
    data = noisy_digits()
    order = np.random.default_rng(CARVE_SEED).permutation(len(data.y))
    parts, start = {}, 0
    for name, size in [*SIZES.items(), ("population", len(order) - sum(SIZES.values()))]:
        rows = np.sort(order[start:start + size])
        parts[name] = Part(data.X[rows], data.y[rows])
        start += size
    return parts


def audit_pool(parts: dict[str, Part], split: str) -> tuple[Part, np.ndarray]:
    """The audited points of a split (the members, then that split's non-members) and their membership."""
    non = parts["val_non" if split == "val" else "test_non"]
    members = parts["members"]
    pool = Part(np.concatenate([members.X, non.X]), np.concatenate([members.y, non.y]))
    return pool, np.concatenate([np.ones(len(members.y), bool), np.zeros(len(non.y), bool)])
