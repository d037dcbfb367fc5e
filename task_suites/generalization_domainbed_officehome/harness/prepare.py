"""Materialise the OfficeHome-like digit domains for one split.

--split val : the training domains (images and labels) into WORKSPACE/data/env{e}_{X,y}.npy, the images of
              Art's validation part (no labels) into WORKSPACE/data/art_val_X.npy, its labels into PRIVATE.
--split test: the images of Art's test part (no labels) into OUT/test_X.npy, its labels into PRIVATE.
Output is byte-for-byte deterministic.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from office_digits import ART_TEST, ART_VAL, ENVIRONMENTS, TRAIN_ENVS, environments  # noqa: E402

from pytest_fmlbench.evalkit import harness_args  # noqa: E402


def main() -> None:
    args = harness_args()
    if args.private is None:
        sys.exit("prepare.py: --private is required")
    envs = environments()
    args.private.mkdir(parents=True, exist_ok=True)
    if args.split == "val":
        if args.workspace is None:
            sys.exit("prepare.py: --workspace is required for --split val")
        data = args.workspace / "data"
        data.mkdir(parents=True, exist_ok=True)
        for e in TRAIN_ENVS:
            X, y = envs[ENVIRONMENTS[e]]
            np.save(data / f"env{e}_X.npy", X)
            np.save(data / f"env{e}_y.npy", y)
        X, y = envs[ART_VAL]
        np.save(data / "art_val_X.npy", X)
        np.save(args.private / "art_val_y.npy", y)
    else:
        if args.out is None:
            sys.exit("prepare.py: --out is required for --split test")
        X, y = envs[ART_TEST]
        args.out.mkdir(parents=True, exist_ok=True)
        np.save(args.out / "test_X.npy", X)
        np.save(args.private / "test_y.npy", y)


if __name__ == "__main__":
    main()
