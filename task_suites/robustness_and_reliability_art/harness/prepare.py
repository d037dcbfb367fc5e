"""Materialise the poisoned data of the robustness_and_reliability_art task for one split.

--split val : the five poisoned training pools (inputs + labels as poisoned, no poison marks) into
              WORKSPACE/data/; the labels, the poison marks and the hidden test sets into PRIVATE.
--split test: the hidden test inputs of each backdoor (no labels, no marks) into OUT, copied from
              PRIVATE (so the test step does not load ART again).
Output is byte-for-byte deterministic.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from pytest_fmlbench.evalkit import harness_args  # noqa: E402

N_BACKDOORS = 5


def main() -> None:
    args = harness_args()
    if args.private is None:
        sys.exit("prepare.py: --private is required")
    if args.split == "val":
        if args.workspace is None:
            sys.exit("prepare.py: --workspace is required for --split val")
        from poisoned_digits import load_sets  # imports ART: only this split needs it

        sets = load_sets()
        data = args.workspace / "data"
        data.mkdir(parents=True, exist_ok=True)
        args.private.mkdir(parents=True, exist_ok=True)
        for name, array in sets.items():
            if name.startswith("pool") and not name.endswith("_is_poison"):
                np.save(data / f"{name}.npy", array)
            np.save(args.private / f"{name}.npy", array)
    else:
        if args.out is None:
            sys.exit("prepare.py: --out is required for --split test")
        args.out.mkdir(parents=True, exist_ok=True)
        for i in range(N_BACKDOORS):
            source = args.private / f"test{i}_X.npy"
            if not source.is_file():
                sys.exit(f"prepare.py: {source} is missing: run --split val first")
            shutil.copyfile(source, args.out / f"test{i}_X.npy")


if __name__ == "__main__":
    main()
