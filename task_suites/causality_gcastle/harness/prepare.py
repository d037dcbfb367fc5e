"""Materialise the synthetic causal-discovery datasets (harness only).

    prepare.py --split val  --workspace W --private P           -> W/data/X_*.npy, P/val/truth_*.npy
    prepare.py --split test --workspace W --private P --out O   -> O/inputs/X_*.npy, P/test/truth_*.npy

The experiment sees only the observational data matrices; the true adjacency matrices go to the
private folder. Structure learning has no per-example labels, so a split is a set of graphs: the
val graphs are fixed and visible through their data, the test graphs use seeds that exist only in
this harness. split_config.json does not select anything here (see evaluate.py).
Output bytes are deterministic: same seeds, single-threaded BLAS, plain .npy and sorted JSON.
"""

from __future__ import annotations

import sys

import numpy as np
from threadpoolctl import threadpool_limits

sys.dont_write_bytecode = True  # keep harness/ free of __pycache__ (it is hashed)
import benchmark as bm  # noqa: E402
from pytest_fmlbench.evalkit import harness_args, write_json  # noqa: E402


def simulate(graph_seed: int) -> tuple[np.ndarray, np.ndarray]:
    """One (data matrix, true binary adjacency) pair from gCastle's simulators."""
    from castle.datasets import DAG, IIDSimulation
    from castle.datasets.simulator import set_random_seed

    # castle's simulators draw from the global numpy RNG; seed it explicitly for each step
    dag = np.asarray(DAG.erdos_renyi(n_nodes=bm.N_NODES, n_edges=bm.N_EDGES, seed=graph_seed))
    truth = (dag != 0).astype(np.int8)
    set_random_seed(graph_seed + bm.DATA_SEED_OFFSET)
    sim = IIDSimulation(W=truth.astype(float), n=bm.N_SAMPLES, method="nonlinear",
                        sem_type=bm.SEM_TYPE, noise_scale=bm.NOISE_SCALE)
    return np.ascontiguousarray(sim.X, dtype=np.float64), truth


def main() -> None:
    args = harness_args()
    if args.workspace is None or args.private is None:
        sys.exit("prepare.py: --workspace and --private are required")
    if args.split == "val":
        visible = args.workspace / "data"
    else:
        if args.out is None:
            sys.exit("prepare.py: --out is required for --split test")
        visible = args.out / "inputs"
    hidden = args.private / args.split
    visible.mkdir(parents=True, exist_ok=True)
    hidden.mkdir(parents=True, exist_ok=True)

    seeds = bm.GRAPH_SEEDS[args.split]
    with bm.quiet_castle(args.private), threadpool_limits(limits=1, user_api="blas"):
        for name, seed in seeds.items():
            X, truth = simulate(seed)
            np.save(visible / bm.input_name(name), X)
            np.save(hidden / bm.truth_name(name), truth)
            print(f"{args.split}/{name}: X {X.shape}, {int(truth.sum())} true edges")
    manifest = {"datasets": list(seeds), "n_nodes": bm.N_NODES, "n_samples": bm.N_SAMPLES}
    write_json(visible / bm.MANIFEST, manifest)
    write_json(hidden / bm.MANIFEST, manifest)


if __name__ == "__main__":
    main()
