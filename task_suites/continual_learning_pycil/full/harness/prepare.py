"""Materialise CIFAR-100 for one split, from the verified archive in the data cache ({data}).

The original's protocol (FML-bench Continual_Learning_pycil on PyCIL at f3509b8): all 50,000 training
images train the sessions; CIFAR-100's 10,000 test images, renumbered by PyCIL's class order (seed 1993),
are cut per class into 30% val (3,000) and 70% test (7,000) with RandomState(42), as the original's
split_cifar100_test cuts them (``taskkit.pycil``).

--split val : the training images and their (original) labels, and the val images without labels, into
              WORKSPACE/data/; the val labels, renumbered as PyCIL numbers the classes, into PRIVATE.
--split test: the hidden test images (no labels) into OUT, their renumbered labels into PRIVATE.
"""

from __future__ import annotations

import sys

import numpy as np

from pytest_fmlbench.evalkit import harness_args
from pytest_fmlbench.taskkit import cifar, pycil

ARCHIVE = ("cifar-100-python", "cifar-100-python.tar.gz")


def main() -> None:
    args = harness_args()
    if args.private is None or args.data is None:
        sys.exit("prepare.py: --private and --data are required")
    archive = args.data.joinpath(*ARCHIVE)
    test_images, test_labels = cifar.read(archive, "cifar100", "test")
    renumbered = pycil.renumber(test_labels, pycil.class_order())
    val_idx, test_idx = pycil.val_test_split(renumbered)
    args.private.mkdir(parents=True, exist_ok=True)
    if args.split == "val":
        if args.workspace is None:
            sys.exit("prepare.py: --workspace is required for --split val")
        images, labels = cifar.read(archive, "cifar100", "train")
        data = args.workspace / "data"
        data.mkdir(parents=True, exist_ok=True)
        np.save(data / "train_images.npy", images)
        np.save(data / "train_labels.npy", labels)
        np.save(data / "val_images.npy", test_images[val_idx])
        np.save(args.private / "val_labels.npy", renumbered[val_idx])
    else:
        if args.out is None:
            sys.exit("prepare.py: --out is required for --split test")
        args.out.mkdir(parents=True, exist_ok=True)
        np.save(args.out / "test_images.npy", test_images[test_idx])
        np.save(args.private / "test_labels.npy", renumbered[test_idx])


if __name__ == "__main__":
    main()
