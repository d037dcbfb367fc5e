"""Materialise poisoned MNIST for one split, from the verified ``mnist.npz`` in the data cache ({data}).

The original's protocol (FML-bench Robustness_and_Reliability_art): 70% of MNIST's test set, per class
with ``RandomState(42)``, is the hidden test (6,996 images); the visible pool is 7,500 training images
drawn with ``RandomState(233)`` plus the other 3,004 test images. For each of the five backdoors:

--split val : the visible pool, poisoned with ``RandomState(233 + 2i)`` and shuffled with
              ``RandomState(233 + 3i)``, into WORKSPACE/data/pool{i}_X.npy (uint8 images) and
              pool{i}_y.npy (labels as poisoned); which rows are poisons into PRIVATE only.
--split test: the hidden test, poisoned with ``RandomState(233 + 2i + 1)``, shuffled with a seed only this
              file knows, into OUT/test{i}_X.npy (no labels); labels and poison marks into PRIVATE.

The original poisons the train part of the pool after the split; here the pool is poisoned as a whole
and split_config.json then cuts it (the split is the agent's to change, the poisoning is not), so the
train part is poisoned at the original's rate. At --scale smoke (the fixture) 40 training images are
drawn instead of 7,500: with the fixture's visible test images, each poisoned pool fits one batch.
"""

from __future__ import annotations

import sys

import numpy as np

from pytest_fmlbench.evalkit import harness_args
from pytest_fmlbench.taskkit import mnist

from poisoned_mnist import poison, triggers

ARCHIVE = ("mnist", "mnist.npz")
HIDDEN_FRACTION, HIDDEN_SEED = 0.70, 42
SELECTION = {"full": 7500, "smoke": 40}
SELECTION_SEED = 233
TEST_ORDER_SEED = 90_210  # shuffles each poisoned test set, so that position says nothing about poison


def stratified_hidden_test(labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(visible, hidden) indices: per class, a RandomState(42) permutation; its last 70% are hidden."""
    rng = np.random.RandomState(HIDDEN_SEED)
    visible, hidden = [], []
    for label in range(10):
        shuffled = rng.permutation(np.flatnonzero(labels == label))
        n_visible = len(shuffled) - int(HIDDEN_FRACTION * len(shuffled))
        visible.extend(shuffled[:n_visible])
        hidden.extend(shuffled[n_visible:])
    return np.array(visible), np.array(hidden)


def main() -> None:
    args = harness_args()
    if args.private is None or args.data is None:
        sys.exit("prepare.py: --private and --data are required")
    (x_train, y_train), (x_test, y_test) = mnist.read(args.data.joinpath(*ARCHIVE))
    visible_test, hidden_test = stratified_hidden_test(y_test)
    selected = np.random.RandomState(SELECTION_SEED).choice(len(x_train), SELECTION[args.scale], replace=False)
    pool_x = np.concatenate([x_train[selected], x_test[visible_test]])
    pool_y = np.concatenate([y_train[selected], y_test[visible_test]])
    backdoors = triggers(int(pool_x.max()))
    args.private.mkdir(parents=True, exist_ok=True)
    if args.split == "val":
        if args.workspace is None:
            sys.exit("prepare.py: --workspace is required for --split val")
        data = args.workspace / "data"
        data.mkdir(parents=True, exist_ok=True)
        for i, trigger in enumerate(backdoors.values()):
            x, y, is_poison = poison(pool_x, pool_y, trigger, np.random.RandomState(233 + 2 * i))
            order = np.random.RandomState(233 + 3 * i).permutation(len(x))
            np.save(data / f"pool{i}_X.npy", x[order])
            np.save(data / f"pool{i}_y.npy", y[order])
            np.save(args.private / f"pool{i}_y.npy", y[order])
            np.save(args.private / f"pool{i}_is_poison.npy", is_poison[order])
    else:
        if args.out is None:
            sys.exit("prepare.py: --out is required for --split test")
        args.out.mkdir(parents=True, exist_ok=True)
        for i, trigger in enumerate(backdoors.values()):
            x, y, is_poison = poison(x_test[hidden_test], y_test[hidden_test], trigger,
                                     np.random.RandomState(233 + 2 * i + 1))
            order = np.random.RandomState(TEST_ORDER_SEED + i).permutation(len(x))
            np.save(args.out / f"test{i}_X.npy", x[order])
            np.save(args.private / f"test{i}_y.npy", y[order])
            np.save(args.private / f"test{i}_is_poison.npy", is_poison[order])


if __name__ == "__main__":
    main()
