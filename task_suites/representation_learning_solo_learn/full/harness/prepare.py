"""Materialise CIFAR-100 for one split, from the verified archive in the data cache ({data}).

The original's protocol (FML-bench Representation_Learning_solo_learn): CIFAR-100's 10,000 test images are cut
with ``RandomState(42).permutation``: the first int(0.3 * 10000) = 3,000 join the visible pool, the other
7,000 are the hidden test. The visible pool is the 50,000 training images followed by those 3,000;
split_config.json cuts it into train and val.

--split val : the visible pool (images + labels) into WORKSPACE/data/, its labels into PRIVATE.
--split test: the hidden test images (no labels) into OUT, their labels into PRIVATE.
"""

from __future__ import annotations

import sys

import numpy as np

from pytest_fmlbench.evalkit import harness_args
from pytest_fmlbench.taskkit import cifar

ARCHIVE = ("cifar-100-python", "cifar-100-python.tar.gz")
VISIBLE_FRACTION, SPLIT_SEED = 0.3, 42


def visible_and_hidden(n: int) -> tuple[np.ndarray, np.ndarray]:
    """(the test images that join the visible pool, the hidden test), in the permuted order."""
    order = np.random.RandomState(SPLIT_SEED).permutation(n)
    n_visible = int(VISIBLE_FRACTION * n)
    return order[:n_visible], order[n_visible:]


def main() -> None:
    args = harness_args()
    if args.private is None or args.data is None:
        sys.exit("prepare.py: --private and --data are required")
    archive = args.data.joinpath(*ARCHIVE)
    test_images, test_labels = cifar.read(archive, "cifar100", "test")
    visible_part, hidden = visible_and_hidden(len(test_images))
    args.private.mkdir(parents=True, exist_ok=True)
    if args.split == "val":
        if args.workspace is None:
            sys.exit("prepare.py: --workspace is required for --split val")
        train_images, train_labels = cifar.read(archive, "cifar100", "train")
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
