"""Score the experiment's adjacency estimates against the true DAGs (harness only).

    evaluate.py --split {val|test} --workspace W --out O --private P --result R

Reads O/adj_<dataset>.npy (written by train.py), the true graphs from P/<split>/, and writes R
with one dataset per graph: SHD (primary, gCastle's MetricsDAG), plus FDR/TPR/F1/nnz. Each
dataset is a single deterministic estimate, so its stderrs are 0; info carries the spread over
graphs. Constraint "dag": every estimate must be a DAG. MetricsDAG reads an i <-> j pair as an
undirected CPDAG edge and never counts it as reversed, so without this check symmetrising an
estimate would lower SHD for free.
split_config.json is validated (its schema is part of the task contract) and recorded, but no
split is carved from it: the datasets are whole graphs fixed by the harness.
"""

from __future__ import annotations

import sys
from pathlib import Path

import networkx as nx
import numpy as np
from pydantic import ValidationError

sys.dont_write_bytecode = True  # keep harness/ free of __pycache__ (it is hashed)
import benchmark as bm  # noqa: E402
from pytest_fmlbench.evalkit import (  # noqa: E402
    ConstraintOutcome,
    harness_args,
    load_split_config,
    read_json,
    write_result,
)

REPORTED = {"shd": "shd", "fdr": "fdr", "tpr": "tpr", "f1": "F1", "nnz": "nnz"}  # ours -> MetricsDAG


class EvalError(Exception):
    """Missing or malformed artefact; reported as one stderr line and a non-zero exit."""


def load_estimate(path: Path, shape: tuple[int, int]) -> np.ndarray:
    if not path.is_file():
        raise EvalError(f"missing estimate {path.name} in the experiment's output folder")
    try:
        est = np.load(path, allow_pickle=False)
    except (ValueError, OSError) as exc:
        raise EvalError(f"{path.name} is not a readable numeric .npy file: {exc}") from None
    if est.shape != shape:
        raise EvalError(f"{path.name} has shape {est.shape}, expected {shape}")
    if not np.issubdtype(est.dtype, np.number) and est.dtype != np.bool_:
        raise EvalError(f"{path.name} has non-numeric dtype {est.dtype}")
    if not np.all(np.isfinite(est)):
        raise EvalError(f"{path.name} contains NaN or inf")
    if not np.all((est == 0) | (est == 1)):
        raise EvalError(f"{path.name} must be binary (0/1), found values {np.unique(est)[:5].tolist()}")
    return est.astype(np.int64)


def is_dag(adj: np.ndarray) -> bool:
    return not np.any(np.diag(adj)) and nx.is_directed_acyclic_graph(nx.DiGraph(adj))


def main() -> None:
    args = harness_args()
    if None in (args.workspace, args.out, args.private, args.result):
        raise EvalError("--workspace, --out, --private and --result are all required")
    try:
        split_config = load_split_config(args.workspace)
    except (ValidationError, OSError, ValueError) as exc:
        raise EvalError(f"invalid split_config.json: {str(exc).splitlines()[0]}") from None
    hidden = args.private / args.split
    if not (hidden / bm.MANIFEST).is_file():
        raise EvalError(f"no prepared {args.split} split in the private folder (run prepare.py first)")
    manifest = read_json(hidden / bm.MANIFEST)

    with bm.quiet_castle(args.private):
        from castle.metrics import MetricsDAG

        means, stderrs, per_graph, non_dags = {}, {}, {}, []
        for name in manifest["datasets"]:
            truth = np.load(hidden / bm.truth_name(name)).astype(np.int64)
            est = load_estimate(args.out / bm.output_name(name), truth.shape)
            # MetricsDAG edits its inputs in place (diagonal, i<->j pairs): hand it copies
            scores = MetricsDAG(est.copy(), truth.copy()).metrics
            means[name] = {ours: float(scores[theirs]) for ours, theirs in REPORTED.items()}
            stderrs[name] = {key: 0.0 for key in REPORTED}
            dag = is_dag(est)
            if not dag:
                non_dags.append(name)
            per_graph[name] = {"is_dag": dag, "true_edges": int(truth.sum()), "est_edges": int(est.sum())}

    shd = np.array([m["shd"] for m in means.values()])
    info = {
        "per_graph": per_graph,
        "shd_mean": float(shd.mean()),
        "shd_stderr_over_graphs": float(shd.std(ddof=1) / np.sqrt(len(shd))) if len(shd) > 1 else 0.0,
        "split_config": split_config.model_dump(),
        "graphs": {"n_nodes": bm.N_NODES, "n_samples": bm.N_SAMPLES, "sem_type": bm.SEM_TYPE},
    }
    constraint = ConstraintOutcome(
        name="dag", ok=not non_dags, value=float(len(non_dags)), limit=0.0,
        detail=f"not a DAG: {', '.join(non_dags)}" if non_dags else "every estimate is a DAG",
    )
    write_result(args.result, means, stderrs=stderrs, constraints=[constraint], info=info)
    print(f"{args.split}: SHD {info['shd_mean']:.2f} (per graph {shd.tolist()}); dag constraint ok={constraint.ok}")


if __name__ == "__main__":
    try:
        main()
    except EvalError as exc:
        print(f"evaluate.py: {exc}", file=sys.stderr)
        sys.exit(1)
