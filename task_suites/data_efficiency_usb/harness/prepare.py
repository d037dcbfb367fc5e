"""Materialise the semi-supervised digits for one split.

--split val : the labeled examples (inputs and labels) and the unlabeled pool (inputs only) into
              WORKSPACE/data/; the unlabeled pool's labels into PRIVATE only (the validation split is
              cut from that pool, and the experiment must never see those labels).
--split test: hidden-test inputs (no labels) into OUT/test_X.npy, their labels into PRIVATE.
Output is byte-for-byte deterministic.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ssl_digits import carve  # noqa: E402

from pytest_fmlbench.evalkit import harness_args  # noqa: E402


def main() -> None:
    args = harness_args()
    if args.private is None:
        sys.exit("prepare.py: --private is required")
    parts = carve()
    args.private.mkdir(parents=True, exist_ok=True)
    if args.split == "val":
        if args.workspace is None:
            sys.exit("prepare.py: --workspace is required for --split val")
        data = args.workspace / "data"
        data.mkdir(parents=True, exist_ok=True)
        for name in ("labeled_X", "labeled_y", "unlabeled_X"):
            np.save(data / f"{name}.npy", parts[name])
        np.save(args.private / "unlabeled_y.npy", parts["unlabeled_y"])
    else:
        if args.out is None:
            sys.exit("prepare.py: --out is required for --split test")
        args.out.mkdir(parents=True, exist_ok=True)
        np.save(args.out / "test_X.npy", parts["test_X"])
        np.save(args.private / "test_y.npy", parts["test_y"])


if __name__ == "__main__":
    main()
