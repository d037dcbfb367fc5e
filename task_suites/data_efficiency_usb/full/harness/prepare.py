"""Materialise CIFAR-100 for one split, from the verified archive in the data cache ({data}).

The original's protocol (FML-bench Data_Efficiency_usb): from the 50,000 training images, 200 are labelled,
2 per class (its code takes num_labels // 100 = 2, although a comment there says 4): per class, in class
order, a shuffle of its indices by the legacy NumPy generator seeded with 42, its first 2; the other 49,800
are unlabelled; CIFAR-100's 10,000 test images are cut with
``RandomState(42).permutation``: its first 3,000 are the val set, the other 7,000 the hidden test.

--split val : labelled images and labels, unlabelled images (no labels) and val images (no labels) into
              WORKSPACE/data/; the val labels into PRIVATE.
--split test: the hidden test images (no labels) into OUT, their labels into PRIVATE.
"""

from __future__ import annotations

import sys

import numpy as np

from pytest_fmlbench.evalkit import harness_args
from pytest_fmlbench.taskkit import cifar

ARCHIVE = ("cifar-100-python", "cifar-100-python.tar.gz")
NUM_CLASSES, LABELS_PER_CLASS, LABEL_SEED = 100, 2, 42
VAL_FRACTION, SPLIT_SEED = 0.3, 42


def labelled_indices(labels: np.ndarray) -> np.ndarray:
    rng = np.random.RandomState(LABEL_SEED)
    chosen = []
    for label in range(NUM_CLASSES):
        members = np.flatnonzero(labels == label)
        rng.shuffle(members)
        chosen.extend(members[:LABELS_PER_CLASS])
    return np.array(chosen)


def val_test_indices(n: int) -> tuple[np.ndarray, np.ndarray]:
    order = np.random.RandomState(SPLIT_SEED).permutation(n)
    n_val = int(VAL_FRACTION * n)
    return order[:n_val], order[n_val:]


def main() -> None:
    args = harness_args()
    if args.private is None or args.data is None:
        sys.exit("prepare.py: --private and --data are required")
    archive = args.data.joinpath(*ARCHIVE)
    test_images, test_labels = cifar.read(archive, "cifar100", "test")
    val_idx, test_idx = val_test_indices(len(test_images))
    args.private.mkdir(parents=True, exist_ok=True)
    if args.split == "val":
        if args.workspace is None:
            sys.exit("prepare.py: --workspace is required for --split val")
        images, labels = cifar.read(archive, "cifar100", "train")
        labelled = labelled_indices(labels)
        unlabelled = np.setdiff1d(np.arange(len(images)), labelled)
        data = args.workspace / "data"
        data.mkdir(parents=True, exist_ok=True)
        np.save(data / "labeled_images.npy", images[labelled])
        np.save(data / "labeled_labels.npy", labels[labelled])
        np.save(data / "unlabeled_images.npy", images[unlabelled])
        np.save(data / "val_images.npy", test_images[val_idx])
        np.save(args.private / "val_labels.npy", test_labels[val_idx])
    else:
        if args.out is None:
            sys.exit("prepare.py: --out is required for --split test")
        args.out.mkdir(parents=True, exist_ok=True)
        np.save(args.out / "test_images.npy", test_images[test_idx])
        np.save(args.private / "test_labels.npy", test_labels[test_idx])


if __name__ == "__main__":
    main()
