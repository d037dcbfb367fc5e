"""Generate FML-bench's Causality_gcastle data for one split (nothing to download: the original draws it from
seeds in its own script, and so does this harness, draw for draw; see pytest_fmlbench.taskkit.mlp_sem).

One 50-node DAG with 100 edges (seed 42) is the truth of both splits; each split observes it through 500
samples of the MLP structural equations with its own seed (val 100, test 200), as in the original.

--split val : the val samples into WORKSPACE/data/X.npy, the true DAG into PRIVATE.
--split test: the test samples into OUT/X.npy, the true DAG into PRIVATE.
--scale smoke draws a 10-node, 20-edge DAG and 100 samples with the same seeds: the same code path, quickly.
"""

from __future__ import annotations

import sys

import numpy as np

from pytest_fmlbench.evalkit import harness_args
from pytest_fmlbench.taskkit import mlp_sem

# (nodes, edges, samples); the original's configuration is "full"
SIZES = {"full": (50, 100, 500), "smoke": (10, 20, 100)}
DAG_SEED = 42
DATA_SEEDS = {"val": 100, "test": 200}


def main() -> None:
    args = harness_args()
    if args.private is None:
        sys.exit("prepare.py: --private is required")
    n_nodes, n_edges, n_samples = SIZES[args.scale]
    dag = mlp_sem.random_dag(n_nodes, n_edges, DAG_SEED)
    X = mlp_sem.sample(dag, n_samples, DATA_SEEDS[args.split])
    if args.split == "val":
        if args.workspace is None:
            sys.exit("prepare.py: --workspace is required for --split val")
        target = args.workspace / "data"
    else:
        if args.out is None:
            sys.exit("prepare.py: --out is required for --split test")
        target = args.out
    target.mkdir(parents=True, exist_ok=True)
    np.save(target / "X.npy", X)
    args.private.mkdir(parents=True, exist_ok=True)
    np.save(args.private / "true_dag.npy", dag)


if __name__ == "__main__":
    main()
