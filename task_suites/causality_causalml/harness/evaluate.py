"""Score the causality_causalml experiment: MAE of its individual treatment-effect estimates.

Reads OUT/ite.npy (one row per replication of the simulated outcomes, one float per evaluated unit in
file order) and the true effects mu1(x) - mu0(x) from PRIVATE (written by prepare.py; never from the
workspace or anything the experiment wrote). For the val split the workspace's split_config.json says
which visible units were held out. Each replication is scored as a data set of its own, with the
original's `mae` (mean absolute error of the ITE, lower is better) and, alongside as in the original,
MSE, PEHE (its root), the estimated and true average effects and the absolute relative error of the
average effect; the task's metric is the mean over the replications, as IHDP's results are.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from pytest_fmlbench.evalkit import fail, harness_args, load_split_config, split_indices, write_result

DATASET = "ihdp_like"  # replication r is the data set "ihdp_like_r"
MAX_BYTES = 1 << 20  # a few thousand floats are expected; anything far larger is refused unread


def load_estimates(path: Path, shape: tuple[int, int]) -> np.ndarray:
    if path.is_symlink() or not path.is_file():
        fail(f"no estimates: {path.name} is missing or not a regular file")
    if path.stat().st_size > MAX_BYTES:
        fail(f"{path.name} is larger than {MAX_BYTES} bytes")
    try:
        ite = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        fail(f"cannot read {path.name} as a .npy array: {str(exc).splitlines()[0]}")
    if ite.shape != shape:
        fail(f"{path.name} has shape {ite.shape}, expected {shape} (replications, units)")
    if not np.issubdtype(ite.dtype, np.number) or not np.all(np.isfinite(ite)):
        fail(f"{path.name} must hold finite numbers (dtype {ite.dtype})")
    return ite.astype(np.float64)


def replication_scores(ite: np.ndarray, truth: np.ndarray) -> tuple[dict[str, float], dict[str, float]]:
    """One replication's metrics and the standard errors of its per-unit means."""
    errors = ite - truth
    mse = float(np.mean(errors**2))
    ate, true_ate = float(ite.mean()), float(truth.mean())
    root_n = math.sqrt(len(truth))
    return ({"mae": float(np.mean(np.abs(errors))), "mse": mse, "pehe": math.sqrt(mse), "ate": ate,
             "true_ate": true_ate, "abs_pct_error_of_ate": abs(ate / true_ate - 1)},
            {"mae": float(np.std(np.abs(errors), ddof=1) / root_n), "mse": float(np.std(errors**2, ddof=1) / root_n)})


def main() -> None:
    args = harness_args()
    for name in ("out", "private", "result") + (("workspace",) if args.split == "val" else ()):
        if getattr(args, name) is None:
            fail(f"--{name} is required")
    try:
        if args.split == "val":
            truth = np.load(args.private / "visible_ite.npy", allow_pickle=False)
            truth = truth[:, split_indices(truth.shape[1], load_split_config(args.workspace))[1]]
        else:
            truth = np.load(args.private / "test_ite.npy", allow_pickle=False)
    except (OSError, ValueError) as exc:
        fail(f"cannot load the true effects or split_config.json: {str(exc).splitlines()[0]}")

    ite = load_estimates(args.out / "ite.npy", truth.shape)
    scores = [replication_scores(estimates, effects) for estimates, effects in zip(ite, truth)]
    write_result(
        args.result,
        {f"{DATASET}_{r}": means for r, (means, _) in enumerate(scores)},
        stderrs={f"{DATASET}_{r}": stderrs for r, (_, stderrs) in enumerate(scores)},
        info={"split": args.split, "n_eval": truth.shape[1], "replications": truth.shape[0]},
    )


if __name__ == "__main__":
    main()
