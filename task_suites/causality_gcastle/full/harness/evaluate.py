"""Score one run's estimated graph against the true DAG (from PRIVATE only) with the original's metrics.

Writes the original's results layout: {"synthetic_dag": {"means": {"shd_mean", "f1_mean", "fdr_mean",
"tpr_mean"}}}. Constraint "dag": the estimate must be a DAG. The original's SHD charges nothing for the
second direction of a pair whose true edge the estimate also holds, so a graph with i <-> j pairs would
lower SHD without telling the direction; the original's baseline always returns a DAG.
"""

from __future__ import annotations

import io

import networkx as nx
import numpy as np

from pytest_fmlbench.evalkit import ConstraintOutcome, fail, harness_args, read_untrusted, write_result
from pytest_fmlbench.taskkit import mlp_sem

DATASET = "synthetic_dag"
REPORTED = ("shd", "f1", "fdr", "tpr")


def load_estimate(path, shape: tuple[int, int]) -> np.ndarray:
    if not path.is_file():
        fail(f"no estimate: {path} is missing")
    try:
        estimate = np.load(io.BytesIO(read_untrusted(path)), allow_pickle=False)
    except (OSError, ValueError) as exc:
        fail(f"cannot read {path.name} as a .npy array: {str(exc).splitlines()[0]}")
    if estimate.shape != shape:
        fail(f"{path.name} has shape {estimate.shape}, expected {shape}")
    if not (np.issubdtype(estimate.dtype, np.number) or estimate.dtype == np.bool_) \
            or not np.all((estimate == 0) | (estimate == 1)):
        fail(f"{path.name} must be a binary (0/1) adjacency matrix")
    return estimate.astype(np.int64)


def main() -> None:
    args = harness_args()
    for name in ("out", "private", "result"):
        if getattr(args, name) is None:
            fail(f"--{name} is required")
    truth = np.load(args.private / "true_dag.npy", allow_pickle=False)
    estimate = load_estimate(args.out / "estimated_dag.npy", truth.shape)
    scores = mlp_sem.edge_scores(truth, estimate)
    acyclic = not np.any(np.diag(estimate)) and nx.is_directed_acyclic_graph(nx.DiGraph(estimate))
    dag = ConstraintOutcome(name="dag", ok=acyclic, value=float(not acyclic), limit=0.0,
                            detail="the estimate is a DAG" if acyclic else
                            "the estimate has a self-loop or a directed cycle (an i <-> j pair is one)")
    write_result(
        args.result,
        {DATASET: {f"{key}_mean": scores[key] for key in REPORTED}},
        stderrs={DATASET: {f"{key}_stderr": 0.0 for key in REPORTED}},
        constraints=[dag],
        info={"split": args.split, "n_nodes": len(truth), **scores},
    )
    print(f"{args.split}: SHD {scores['shd']:.0f}, F1 {scores['f1']:.4f}, {scores['n_est_edges']} edges "
          f"estimated of {scores['n_true_edges']}; dag ok={acyclic}")


if __name__ == "__main__":
    main()
