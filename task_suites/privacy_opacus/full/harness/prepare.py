"""Materialise CIFAR-10 for one split, from the verified archive in the data cache ({data}).

The original's protocol: the 50,000 training images only (the official test set is not used); a hidden
test of int(0.21 * 50000) = 10,500 images is carved first with RandomState(42); the remaining 39,500
are the visible pool.

--split val : the visible pool (images + labels) into WORKSPACE/data/, its labels into PRIVATE.
--split test: the hidden test images (no labels) into OUT, their labels into PRIVATE.
"""

from __future__ import annotations

import sys

import numpy as np

from pytest_fmlbench.evalkit import harness_args
from pytest_fmlbench.taskkit import cifar, splits

ARCHIVE = ("cifar-10-python", "cifar-10-python.tar.gz")
TEST_FRACTION, TEST_SEED = 0.21, 42


def main() -> None:
    args = harness_args()
    if args.private is None or args.data is None:
        sys.exit("prepare.py: --private and --data are required")
    images, labels = cifar.read(args.data.joinpath(*ARCHIVE), "cifar10", "train")
    test_idx, visible_idx = splits.hidden_test(len(images), TEST_FRACTION, TEST_SEED)
    args.private.mkdir(parents=True, exist_ok=True)
    if args.split == "val":
        if args.workspace is None:
            sys.exit("prepare.py: --workspace is required for --split val")
        data = args.workspace / "data"
        data.mkdir(parents=True, exist_ok=True)
        np.save(data / "visible_images.npy", images[visible_idx])
        np.save(data / "visible_labels.npy", labels[visible_idx])
        np.save(args.private / "visible_labels.npy", labels[visible_idx])
    else:
        if args.out is None:
            sys.exit("prepare.py: --out is required for --split test")
        args.out.mkdir(parents=True, exist_ok=True)
        np.save(args.out / "test_images.npy", images[test_idx])
        np.save(args.private / "test_labels.npy", labels[test_idx])


if __name__ == "__main__":
    main()
