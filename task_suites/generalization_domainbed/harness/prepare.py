"""Materialise ColoredMNIST-on-digits for one split.

--split val : the training environments (images and labels) into WORKSPACE/data/env{e}_{X,y}.npy and the
              held-out environment's validation images (no labels) into WORKSPACE/data/val_X.npy; the
              validation labels into PRIVATE (the evaluator never reads labels from the workspace).
--split test: the held-out environment's test images (no labels) into OUT/test_X.npy, their labels into
              PRIVATE. The test images' digits are none of the validation images' digits.
Output is byte-for-byte deterministic.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from colored_digits import TEST_ENV, TRAIN_ENVS, environments, held_out_split  # noqa: E402

from pytest_fmlbench.evalkit import harness_args  # noqa: E402


def main() -> None:
    args = harness_args()
    if args.private is None:
        sys.exit("prepare.py: --private is required")
    envs = environments()
    held_out = envs[TEST_ENV]
    val_rows, test_rows = held_out_split(held_out)
    args.private.mkdir(parents=True, exist_ok=True)
    if args.split == "val":
        if args.workspace is None:
            sys.exit("prepare.py: --workspace is required for --split val")
        data = args.workspace / "data"
        data.mkdir(parents=True, exist_ok=True)
        for e in TRAIN_ENVS:
            np.save(data / f"env{e}_X.npy", envs[e].X)
            np.save(data / f"env{e}_y.npy", envs[e].y)
        np.save(data / "val_X.npy", held_out.X[val_rows])
        np.save(args.private / "val_y.npy", held_out.y[val_rows])
    else:
        if args.out is None:
            sys.exit("prepare.py: --out is required for --split test")
        args.out.mkdir(parents=True, exist_ok=True)
        np.save(args.out / "test_X.npy", held_out.X[test_rows])
        np.save(args.private / "test_y.npy", held_out.y[test_rows])


if __name__ == "__main__":
    main()
