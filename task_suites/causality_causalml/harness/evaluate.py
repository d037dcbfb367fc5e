"""Score the causality_causalml experiment: MAE of its individual treatment-effect estimates.

Reads OUT/ite.npy (one float per evaluated unit, in file order) and the true effects mu1(x) - mu0(x)
from PRIVATE (written by prepare.py; never from the workspace or anything the experiment wrote). For
the val split the workspace's split_config.json says which visible units were held out. The metric
is the original's `mae` (mean absolute error of the ITE, lower is better); MSE, PEHE (its root), the
estimated and true average effects and the absolute relative error of the average effect are
reported alongside, as in the original.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from pytest_fmlbench.evalkit import fail, harness_args, load_split_config, split_indices, write_result

DATASET = "ihdp_like"
MAX_BYTES = 1 << 20  # a few hundred floats are expected; anything far larger is refused unread


def load_estimates(path: Path, n_expected: int) -> np.ndarray:
    if path.is_symlink() or not path.is_file():
        fail(f"no estimates: {path.name} is missing or not a regular file")
    if path.stat().st_size > MAX_BYTES:
        fail(f"{path.name} is larger than {MAX_BYTES} bytes")
    try:
        ite = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        fail(f"cannot read {path.name} as a .npy array: {str(exc).splitlines()[0]}")
    if ite.shape != (n_expected,):
        fail(f"{path.name} has shape {ite.shape}, expected ({n_expected},)")
    if not np.issubdtype(ite.dtype, np.number) or not np.all(np.isfinite(ite)):
        fail(f"{path.name} must hold finite numbers (dtype {ite.dtype})")
    return ite.astype(np.float64)


def main() -> None:
    args = harness_args()
    for name in ("out", "private", "result") + (("workspace",) if args.split == "val" else ()):
        if getattr(args, name) is None:
            fail(f"--{name} is required")
    try:
        if args.split == "val":
            truth = np.load(args.private / "visible_ite.npy", allow_pickle=False)
            truth = truth[split_indices(len(truth), load_split_config(args.workspace))[1]]
        else:
            truth = np.load(args.private / "test_ite.npy", allow_pickle=False)
    except (OSError, ValueError) as exc:
        fail(f"cannot load the true effects or split_config.json: {str(exc).splitlines()[0]}")

    ite = load_estimates(args.out / "ite.npy", len(truth))
    errors = ite - truth
    mae = float(np.mean(np.abs(errors)))
    mse = float(np.mean(errors**2))
    ate, true_ate = float(ite.mean()), float(truth.mean())
    n = len(truth)
    write_result(
        args.result,
        {DATASET: {"mae": mae, "mse": mse, "pehe": math.sqrt(mse), "ate": ate, "true_ate": true_ate,
                   "abs_pct_error_of_ate": abs(ate / true_ate - 1)}},
        stderrs={DATASET: {"mae": float(np.std(np.abs(errors), ddof=1) / math.sqrt(n)),
                           "mse": float(np.std(errors**2, ddof=1) / math.sqrt(n))}},
        info={"split": args.split, "n_eval": n},
    )


if __name__ == "__main__":
    main()
