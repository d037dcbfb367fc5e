"""Materialise the federated digits for one split.

--split val : every client's visible pool (inputs, labels, client ids) into WORKSPACE/data/, and a copy
              of the labels and client ids into PRIVATE (the evaluator never reads the workspace's).
--split test: the hidden test inputs and their client ids (no labels) into OUT; labels into PRIVATE.
Output is byte-for-byte deterministic.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fed_data  # noqa: E402

from pytest_fmlbench.evalkit import harness_args  # noqa: E402


def main() -> None:
    args = harness_args()
    if args.private is None:
        sys.exit("prepare.py: --private is required")
    data = fed_data.load()
    args.private.mkdir(parents=True, exist_ok=True)
    if args.split == "val":
        if args.workspace is None:
            sys.exit("prepare.py: --workspace is required for --split val")
        folder = args.workspace / "data"
        folder.mkdir(parents=True, exist_ok=True)
        np.save(folder / "visible_X.npy", data.visible_X)
        np.save(folder / "visible_y.npy", data.visible_y)
        np.save(folder / "visible_client.npy", data.visible_client)
        np.save(args.private / "visible_y.npy", data.visible_y)
        np.save(args.private / "visible_client.npy", data.visible_client)
    else:
        if args.out is None:
            sys.exit("prepare.py: --out is required for --split test")
        args.out.mkdir(parents=True, exist_ok=True)
        np.save(args.out / "test_X.npy", data.test_X)
        np.save(args.out / "test_client.npy", data.test_client)
        np.save(args.private / "test_y.npy", data.test_y)
        np.save(args.private / "test_client.npy", data.test_client)


if __name__ == "__main__":
    main()
