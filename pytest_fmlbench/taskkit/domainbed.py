"""DomainBed's data protocol (facebookresearch/DomainBed, the commit FML-bench pins), for the harness.

The original runs ``domainbed.scripts.train`` with seed 0 and ``--holdout_fraction 0.3``: every
environment is cut into an out-split (30%) and an in-split (70%) by ``misc.split_dataset`` seeded with
``misc.seed_hash(trial_seed, env_index)``; the model trains on the training environments' in-splits,
and FML-bench reads the held-out environment's out-split accuracy as validation and its in-split
accuracy as the test. ColoredMNIST's three environments are built from all 70,000 MNIST digits after
``torch.manual_seed(0)``, exactly as ``datasets.ColoredMNIST`` builds them. The harness reproduces
both here, so that the hidden in-split never reaches the experiment's process.
"""

from __future__ import annotations

import hashlib

import numpy as np

HOLDOUT_FRACTION = 0.3
TRIAL_SEED = 0
SEED = 0
COLORED_MNIST_FLIPS = (0.1, 0.2, 0.9)  # the colour disagrees with the label this often, per environment
LABEL_NOISE = 0.25


def seed_hash(*args) -> int:
    """``domainbed.lib.misc.seed_hash``: an integer seed from the arguments' ``str`` (MD5, mod 2**31)."""
    return int(hashlib.md5(str(args).encode("utf-8")).hexdigest(), 16) % (2**31)


def holdout_split(n: int, env_index: int, fraction: float = HOLDOUT_FRACTION,
                  trial_seed: int = TRIAL_SEED) -> tuple[np.ndarray, np.ndarray]:
    """(out-split, in-split) indices of an environment of ``n`` examples, as ``misc.split_dataset`` cuts it."""
    keys = list(range(n))
    np.random.RandomState(seed_hash(trial_seed, env_index)).shuffle(keys)
    cut = int(n * fraction)
    return np.asarray(keys[:cut], dtype=np.int64), np.asarray(keys[cut:], dtype=np.int64)


def colored_mnist(images: np.ndarray, labels: np.ndarray, seed: int = SEED) -> list[tuple[np.ndarray, np.ndarray]]:
    """ColoredMNIST's environments from MNIST's train + test digits (N x 28 x 28 uint8, in that order).

    Returns, per environment, (images N x 2 x 28 x 28 uint8: one colour channel zeroed, labels int64);
    the experiment divides by 255 as DomainBed does. The draws follow DomainBed's order on torch's CPU
    generator: one permutation of all digits, then per environment the label noise and the colour flips.
    """
    import torch

    torch.manual_seed(seed)
    digits = torch.from_numpy(np.ascontiguousarray(images, dtype=np.uint8))
    targets = torch.from_numpy(np.asarray(labels, dtype=np.int64))
    order = torch.randperm(len(digits))
    digits, targets = digits[order], targets[order]
    environments = []
    count = len(COLORED_MNIST_FLIPS)
    for index, flip in enumerate(COLORED_MNIST_FLIPS):
        env_digits, env_targets = digits[index::count], targets[index::count]
        binary = (env_targets < 5).float()
        binary = (binary - (torch.rand(len(binary)) < LABEL_NOISE).float()).abs()
        colours = (binary - (torch.rand(len(binary)) < flip).float()).abs()
        coloured = torch.stack([env_digits, env_digits], dim=1)
        coloured[torch.arange(len(coloured)), (1 - colours).long(), :, :] *= 0
        environments.append((coloured.numpy(), binary.long().numpy()))
    return environments
