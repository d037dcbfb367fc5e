"""Materialise CIFAR-10 for one split, from the verified archive in the data cache ({data}).

The original's protocol (FML-bench Representation_Learning_lightly): CIFAR-10's 10,000 test images are cut
per class (one ``RandomState(42)`` for all classes, in class order; ``taskkit.stratified``): the first 30% of
each class, 3,000 in all, join the visible pool, the other 7,000 are the hidden test. The visible pool is the
50,000 training images followed by those 3,000; split_config.json cuts it into train and val.

--split val : the visible pool (images + labels) into WORKSPACE/data/, its labels into PRIVATE.
--split test: the hidden test images (no labels) into OUT, their labels into PRIVATE.
"""

from __future__ import annotations

import sys

import numpy as np

from pytest_fmlbench.evalkit import harness_args
from pytest_fmlbench.taskkit import cifar, stratified

ARCHIVE = ("cifar-10-python", "cifar-10-python.tar.gz")
NUM_CLASSES, VISIBLE_FRACTION, SPLIT_SEED = 10, 0.3, 42


def visible_and_hidden(test_labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the test images that join the visible pool, the hidden test): indices into CIFAR-10's test set."""
    return stratified.per_class_split(test_labels, VISIBLE_FRACTION, SPLIT_SEED, NUM_CLASSES)


def main() -> None:
    args = harness_args()
    if args.private is None or args.data is None:
        sys.exit("prepare.py: --private and --data are required")
    archive = args.data.joinpath(*ARCHIVE)
    test_images, test_labels = cifar.read(archive, "cifar10", "test")
    visible_part, hidden = visible_and_hidden(test_labels)
    args.private.mkdir(parents=True, exist_ok=True)
    if args.split == "val":
        if args.workspace is None:
            sys.exit("prepare.py: --workspace is required for --split val")
        train_images, train_labels = cifar.read(archive, "cifar10", "train")
        labels = np.concatenate([train_labels, test_labels[visible_part]])
        data = args.workspace / "data"
        data.mkdir(parents=True, exist_ok=True)
        np.save(data / "visible_images.npy", np.concatenate([train_images, test_images[visible_part]]))
        np.save(data / "visible_labels.npy", labels)
        np.save(args.private / "visible_labels.npy", labels)
    else:
        if args.out is None:
            sys.exit("prepare.py: --out is required for --split test")
        args.out.mkdir(parents=True, exist_ok=True)
        np.save(args.out / "test_images.npy", test_images[hidden])
        np.save(args.private / "test_labels.npy", test_labels[hidden])


if __name__ == "__main__":
    main()
