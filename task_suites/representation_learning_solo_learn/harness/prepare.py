"""Materialise the task's data for one split.

--split val : the visible pool's images (no labels) into WORKSPACE/data/visible_X.npy.
--split test: nothing. The hidden-test images never leave the harness: the evaluator regenerates
              them, with every label, from the seeds in data.py, extracts their features with the
              backbone it builds itself, and scores its own probe on them.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from data import load_pool  # noqa: E402

from pytest_fmlbench.evalkit import harness_args  # noqa: E402


def main() -> None:
    args = harness_args()
    if args.split == "test":
        return
    if args.workspace is None:
        sys.exit("prepare.py: --workspace is required for --split val")
    visible_X, _, _, _ = load_pool(with_test=False)
    data = args.workspace / "data"
    data.mkdir(parents=True, exist_ok=True)
    np.save(data / "visible_X.npy", visible_X)


if __name__ == "__main__":
    main()
