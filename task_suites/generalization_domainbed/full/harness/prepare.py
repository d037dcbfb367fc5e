"""Materialise ColoredMNIST for one split, from the verified MNIST archive in the data cache ({data}).

The original's protocol (DomainBed's train.py, seed 0, test environment 2, holdout fraction 0.3):
all 70,000 MNIST digits dealt into three coloured environments; each cut into an out-split (30%) and
an in-split (70%). Environments 0 and 1 are the training domains; environment 2's out-split is the
validation set and its in-split the hidden test.

--split val : environments 0 and 1 (in- and out-splits, with labels) and environment 2's out-split
              (images only) into WORKSPACE/data/; that out-split's labels into PRIVATE.
--split test: environment 2's in-split images into OUT, their labels into PRIVATE.
"""

from __future__ import annotations

import sys

import numpy as np

from pytest_fmlbench.evalkit import harness_args
from pytest_fmlbench.taskkit import domainbed, mnist

ARCHIVE = ("mnist-npz", "mnist.npz")
TEST_ENV = 2


def main() -> None:
    args = harness_args()
    if args.private is None or args.data is None:
        sys.exit("prepare.py: --private and --data are required")
    environments = domainbed.colored_mnist(*mnist.read_all(args.data.joinpath(*ARCHIVE)))
    splits = [domainbed.holdout_split(len(labels), index) for index, (_, labels) in enumerate(environments)]
    images, labels = environments[TEST_ENV]
    held_out, held_in = splits[TEST_ENV]
    args.private.mkdir(parents=True, exist_ok=True)
    if args.split == "val":
        if args.workspace is None:
            sys.exit("prepare.py: --workspace is required for --split val")
        data = args.workspace / "data"
        data.mkdir(parents=True, exist_ok=True)
        for index, (env_images, env_labels) in enumerate(environments):
            if index == TEST_ENV:
                continue
            for part, positions in zip(("out", "in"), splits[index]):
                np.save(data / f"env{index}_{part}_images.npy", env_images[positions])
                np.save(data / f"env{index}_{part}_labels.npy", env_labels[positions])
        np.save(data / f"env{TEST_ENV}_out_images.npy", images[held_out])
        np.save(args.private / "val_labels.npy", labels[held_out])
    else:
        if args.out is None:
            sys.exit("prepare.py: --out is required for --split test")
        args.out.mkdir(parents=True, exist_ok=True)
        np.save(args.out / "test_images.npy", images[held_in])
        np.save(args.private / "test_labels.npy", labels[held_in])


if __name__ == "__main__":
    main()
