"""Materialise the OOD-detection data for one split, from the verified archives in the data cache ({data}).

The original's protocol (FML-bench Robustness_openood): CIFAR-10 is in-distribution. Its 10,000 test images
are cut with ``RandomState(42).permutation``: the first int(0.3 * 10000) = 3,000 join the visible pool, the
other 7,000 are the hidden in-distribution test. The visible pool is the 50,000 training images followed by
those 3,000; split_config.json cuts it into train and val. The val OOD set is CIFAR-100's 10,000 test images
(near-OOD); the test OOD set is 5,000 of SVHN's 26,032 test images (far-OOD), the first 5,000 of
``RandomState(42).permutation``.

--split val : the visible pool (images + labels) and the val OOD images into WORKSPACE/data/; the pool's size
              and the OOD count into PRIVATE (at --scale smoke, only the first 16 CIFAR-100 images).
--split test: the hidden ID images and the SVHN images, mixed in an order drawn afresh from the operating
              system's entropy (a published seed would give away which is which), into OUT/test_images.npy;
              which is which into PRIVATE only.
"""

from __future__ import annotations

import secrets
import sys

import numpy as np

from pytest_fmlbench.evalkit import harness_args
from pytest_fmlbench.taskkit import cifar, svhn

CIFAR10 = ("cifar-10-python", "cifar-10-python.tar.gz")
CIFAR100 = ("cifar-100-python", "cifar-100-python.tar.gz")
SVHN_TEST = ("svhn-test-32x32", "test_32x32.mat")
VISIBLE_FRACTION, SPLIT_SEED = 0.3, 42
SVHN_COUNT, SVHN_SEED = 5000, 42
SMOKE_VAL_OOD = 16


def visible_and_hidden(n: int) -> tuple[np.ndarray, np.ndarray]:
    """(visible part, hidden ID test) of CIFAR-10's n test images, in the permuted order."""
    order = np.random.RandomState(SPLIT_SEED).permutation(n)
    n_visible = int(VISIBLE_FRACTION * n)
    return order[:n_visible], order[n_visible:]


def svhn_subset(n: int) -> np.ndarray:
    """The SVHN test images the original scores (all of them when fewer than 5,000, as in a fixture)."""
    return np.random.RandomState(SVHN_SEED).permutation(n)[:SVHN_COUNT]


def main() -> None:
    args = harness_args()
    if args.private is None or args.data is None:
        sys.exit("prepare.py: --private and --data are required")
    test_images, test_labels = cifar.read(args.data.joinpath(*CIFAR10), "cifar10", "test")
    visible_part, hidden = visible_and_hidden(len(test_images))
    args.private.mkdir(parents=True, exist_ok=True)
    if args.split == "val":
        if args.workspace is None:
            sys.exit("prepare.py: --workspace is required for --split val")
        train_images, train_labels = cifar.read(args.data.joinpath(*CIFAR10), "cifar10", "train")
        ood_images, _ = cifar.read(args.data.joinpath(*CIFAR100), "cifar100", "test")
        if args.scale == "smoke":  # a ResNet-18 scores a few images a second on a CI machine's CPU
            ood_images = ood_images[:SMOKE_VAL_OOD]
        data = args.workspace / "data"
        data.mkdir(parents=True, exist_ok=True)
        np.save(data / "visible_images.npy", np.concatenate([train_images, test_images[visible_part]]))
        np.save(data / "visible_labels.npy", np.concatenate([train_labels, test_labels[visible_part]]))
        np.save(data / "val_ood_images.npy", ood_images)
        np.save(args.private / "val_counts.npy", np.array([len(train_images) + len(visible_part), len(ood_images)]))
    else:
        if args.out is None:
            sys.exit("prepare.py: --out is required for --split test")
        far_ood, _ = svhn.read(args.data.joinpath(*SVHN_TEST))
        far_ood = far_ood[svhn_subset(len(far_ood))]
        images = np.concatenate([test_images[hidden], far_ood])
        is_id = np.concatenate([np.ones(len(hidden), dtype=np.int8), np.zeros(len(far_ood), dtype=np.int8)])
        order = np.random.default_rng(secrets.randbits(128)).permutation(len(images))
        args.out.mkdir(parents=True, exist_ok=True)
        np.save(args.out / "test_images.npy", images[order])
        np.save(args.private / "test_is_id.npy", is_id[order])


if __name__ == "__main__":
    main()
