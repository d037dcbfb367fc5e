"""Experiment driver (PROTECTED): run the structure learner on every dataset of a split.

    python train.py --split val  --out DIR   # data from ./data/
    python train.py --split test --out DIR   # data from DIR/inputs/ (written by the harness)

For each dataset listed in datasets.json it loads the observational matrix X_<name>.npy, calls
algorithm.learn_structure(X, config) with config.json, and saves the returned adjacency matrix
as DIR/adj_<name>.npy. It never sees the true graphs; scoring is done by the harness.
"""

from __future__ import annotations

import json
import logging
import os
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

from pytest_fmlbench.evalkit import harness_args, read_json, write_json

HERE = Path(__file__).resolve().parent


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    import torch  # gCastle imports torch anyway; seed it for learners that use it

    torch.manual_seed(seed)
    if os.environ.get("OMP_NUM_THREADS"):
        torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))


def main() -> None:
    args = harness_args()
    if args.out is None:
        sys.exit("train.py: --out is required")
    args.out.mkdir(parents=True, exist_ok=True)
    inputs = HERE / "data" if args.split == "val" else args.out / "inputs"
    manifest = read_json(inputs / "datasets.json")
    config = read_json(HERE / "config.json")

    # gCastle imports matplotlib, which writes a font cache under $HOME, and sets the root logger
    # to INFO (one line per NOTEARS iteration): keep the cache in a scratch folder inside --out
    # that is removed on exit, and the logs at WARNING.
    with tempfile.TemporaryDirectory(dir=args.out, prefix=".mplconfig-") as scratch:
        os.environ["MPLCONFIGDIR"] = scratch
        os.environ.setdefault("CASTLE_BACKEND", "pytorch")
        logging.basicConfig(level=logging.WARNING)
        sys.path.insert(0, str(HERE))
        import algorithm

        report = {"split": args.split, "config": config, "datasets": {}}
        for name in manifest["datasets"]:
            X = np.load(inputs / f"X_{name}.npy")
            seed_everything(int(config.get("seed", 0)))
            start = time.perf_counter()
            # The learners work on d x d matrices (d ~ 15): multi-threaded BLAS only adds
            # synchronisation cost there (measured ~5x slower on 2 busy cores), so use one thread.
            with threadpool_limits(limits=1, user_api="blas"):
                adj = np.asarray(algorithm.learn_structure(X, dict(config)))
            seconds = time.perf_counter() - start
            np.save(args.out / f"adj_{name}.npy", adj)
            edges = int(np.count_nonzero(adj)) if adj.dtype != object else -1
            report["datasets"][name] = {"seconds": round(seconds, 2), "shape": list(adj.shape), "edges": edges}
            print(f"{args.split}/{name}: X {X.shape} -> {edges} edges in {seconds:.1f} s", flush=True)
    write_json(args.out / "run_info.json", report)
    print(json.dumps({k: v["edges"] for k, v in report["datasets"].items()}))


if __name__ == "__main__":
    main()
