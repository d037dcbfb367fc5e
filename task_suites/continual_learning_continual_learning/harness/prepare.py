"""Materialise the digits for one split.

--split val : the visible pool (inputs + labels) into WORKSPACE/data/, a copy of its labels into PRIVATE
              (the evaluator never reads labels from the workspace).
--split test: the hidden test inputs (no labels) into OUT, their labels into PRIVATE.
Output is byte-for-byte deterministic.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cl_data  # noqa: E402

from pytest_fmlbench.evalkit import harness_args  # noqa: E402


def main() -> None:
    args = harness_args()
    if args.private is None:
        sys.exit("prepare.py: --private is required")
    visible_X, visible_y, test_X, test_y = cl_data.load()
    args.private.mkdir(parents=True, exist_ok=True)
    if args.split == "val":
        if args.workspace is None:
            sys.exit("prepare.py: --workspace is required for --split val")
        data = args.workspace / "data"
        data.mkdir(parents=True, exist_ok=True)
        np.save(data / "visible_X.npy", visible_X)
        np.save(data / "visible_y.npy", visible_y)
        np.save(args.private / "visible_y.npy", visible_y)
    else:
        if args.out is None:
            sys.exit("prepare.py: --out is required for --split test")
        args.out.mkdir(parents=True, exist_ok=True)
        np.save(args.out / "test_X.npy", test_X)
        np.save(args.private / "test_y.npy", test_y)


if __name__ == "__main__":
    main()
