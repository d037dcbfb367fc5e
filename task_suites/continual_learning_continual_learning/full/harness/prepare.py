"""Materialise split MNIST for one split, from the verified MNIST archive in the data cache ({data}).

The original's protocol (FML-bench Continual_Learning_continual_learning on GMvandeVen/continual-learning at
7cb0ef5): all 60,000 training digits train the five contexts; each context's MNIST test digits are cut 30% val,
70% test by the context's own seeded permutation (``taskkit.splitmnist``). The scored images of all five
contexts are then put in one order drawn with a seed kept here, so that no image's position tells its context:
in the class-incremental scenario the model labels an image without being told which context it came from.

--split val : the training digits and their labels, and the val digits without labels, into WORKSPACE/data/;
              the val labels, in the same order, into PRIVATE.
--split test: the hidden test digits (no labels) into OUT, their labels into PRIVATE.
"""

from __future__ import annotations

import sys

import numpy as np

from pytest_fmlbench.evalkit import harness_args
from pytest_fmlbench.taskkit import mnist, splitmnist

ARCHIVE = ("mnist-npz", "mnist.npz")
# the order the scored images are handed over in; it lives in harness/ only, which agent code cannot read
SCORED_ORDER_SEED = 90417


def scored(positions: np.ndarray) -> np.ndarray:
    return positions[np.random.default_rng(SCORED_ORDER_SEED).permutation(len(positions))]


def main() -> None:
    args = harness_args()
    if args.private is None or args.data is None:
        sys.exit("prepare.py: --private and --data are required")
    (train_images, train_labels), (test_images, test_labels) = mnist.read(args.data.joinpath(*ARCHIVE))
    val_idx, test_idx = splitmnist.val_test_split(test_labels)
    args.private.mkdir(parents=True, exist_ok=True)
    if args.split == "val":
        if args.workspace is None:
            sys.exit("prepare.py: --workspace is required for --split val")
        data = args.workspace / "data"
        data.mkdir(parents=True, exist_ok=True)
        np.save(data / "train_images.npy", train_images)
        np.save(data / "train_labels.npy", train_labels)
        order = scored(val_idx)
        np.save(data / "val_images.npy", test_images[order])
        np.save(args.private / "val_labels.npy", test_labels[order])
    else:
        if args.out is None:
            sys.exit("prepare.py: --out is required for --split test")
        args.out.mkdir(parents=True, exist_ok=True)
        order = scored(test_idx)
        np.save(args.out / "test_images.npy", test_images[order])
        np.save(args.private / "test_labels.npy", test_labels[order])


if __name__ == "__main__":
    main()
