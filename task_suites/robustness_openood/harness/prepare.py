"""Materialise the data of the robustness_openood task for one split.

--split val : the visible pool of in-distribution digits (inputs + labels) and the near-OOD letters
              into WORKSPACE/data/; copies of the labels into PRIVATE (the evaluator reads only those).
--split test: the hidden test inputs, in-distribution digits and far-OOD images shuffled together with
              no marks, into OUT/test_X.npy; which is which, and the classes, into PRIVATE.
Output is byte-for-byte deterministic.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ood_data import load_sets  # noqa: E402

from pytest_fmlbench.evalkit import harness_args  # noqa: E402


def main() -> None:
    args = harness_args()
    if args.private is None:
        sys.exit("prepare.py: --private is required")
    sets = load_sets()
    args.private.mkdir(parents=True, exist_ok=True)
    if args.split == "val":
        if args.workspace is None:
            sys.exit("prepare.py: --workspace is required for --split val")
        data = args.workspace / "data"
        data.mkdir(parents=True, exist_ok=True)
        for name in ("visible_X", "visible_y", "val_ood_X"):
            np.save(data / f"{name}.npy", sets[name])
        np.save(args.private / "visible_y.npy", sets["visible_y"])
        np.save(args.private / "n_val_ood.npy", np.array(len(sets["val_ood_X"])))
    else:
        if args.out is None:
            sys.exit("prepare.py: --out is required for --split test")
        args.out.mkdir(parents=True, exist_ok=True)
        np.save(args.out / "test_X.npy", sets["test_X"])
        np.save(args.private / "test_y.npy", sets["test_y"])


if __name__ == "__main__":
    main()
