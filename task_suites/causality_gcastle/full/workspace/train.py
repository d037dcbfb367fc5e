"""Experiment driver (protected): run algorithm.run_causal_discovery on one split's observations.

    python train.py --split val  --out OUT   observations from data/X.npy
    python train.py --split test --out OUT   observations from OUT/X.npy (written by the harness)

Writes OUT/estimated_dag.npy (the binary adjacency matrix) and OUT/run_info.json. The true graph is never
here: the harness scores the estimate.
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

from pytest_fmlbench.evalkit import harness_args, write_json

HERE = Path(__file__).resolve().parent


def main() -> None:
    args = harness_args()
    if args.out is None:
        sys.exit("train.py: --out is required")
    args.out.mkdir(parents=True, exist_ok=True)
    X = np.load(HERE / "data" / "X.npy" if args.split == "val" else args.out / "X.npy", allow_pickle=False)

    # gCastle imports matplotlib, which writes a font cache under $HOME: keep it in a scratch folder that is
    # removed on exit. gCastle also sets the root logger to INFO (a line per NOTEARS iteration): keep WARNING.
    with tempfile.TemporaryDirectory(dir=args.out, prefix=".mplconfig-") as scratch:
        os.environ["MPLCONFIGDIR"] = scratch
        os.environ.setdefault("CASTLE_BACKEND", "pytorch")
        logging.basicConfig(level=logging.WARNING)
        sys.path.insert(0, str(HERE))
        import algorithm

        start = time.perf_counter()
        # one BLAS thread: the matrices are 50 x 50, where threads only add synchronisation, and the
        # baseline's result does not depend on how many cores the machine has
        with threadpool_limits(limits=1, user_api="blas"):
            estimate = np.asarray(algorithm.run_causal_discovery(X, true_dag=None))
        seconds = time.perf_counter() - start

    if estimate.shape != (X.shape[1], X.shape[1]):
        sys.exit(f"train.py: run_causal_discovery returned shape {estimate.shape}, "
                 f"expected ({X.shape[1]}, {X.shape[1]})")
    np.save(args.out / "estimated_dag.npy", estimate)
    edges = int(np.count_nonzero(estimate)) if np.issubdtype(estimate.dtype, np.number) else None
    write_json(args.out / "run_info.json", {"split": args.split, "shape": list(X.shape), "edges": edges,
                                            "seconds": round(seconds, 2)})
    print(f"{args.split}: X {X.shape} -> {edges} edges in {seconds:.1f} s", flush=True)


if __name__ == "__main__":
    main()
