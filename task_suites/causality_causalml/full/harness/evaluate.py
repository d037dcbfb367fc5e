"""Score one run's estimated individual effects against the true effects (from PRIVATE only), with the
original's metrics: ATE, MAE (the primary), MSE, AUUC (causalml.metrics.auuc_score over the estimates, the
true effects and the units' treatment and outcome) and the absolute relative error of the ATE.

Writes the original's results layout: {"ihdp_test": {"means": {"mae_mean", ...}}}, under its dataset name for
both splits, as the original does.
"""

from __future__ import annotations

import io
import os
import tempfile

import numpy as np
import pandas as pd

from pytest_fmlbench.evalkit import fail, harness_args, load_split_config, read_untrusted, write_result
from pytest_fmlbench.taskkit import ihdp

DATASET = "ihdp_test"


def load_estimates(path, n_expected: int) -> np.ndarray:
    if not path.is_file():
        fail(f"no estimates: {path} is missing")
    try:
        estimates = np.load(io.BytesIO(read_untrusted(path)), allow_pickle=False)
    except (OSError, ValueError) as exc:
        fail(f"cannot read {path.name} as a .npy array: {str(exc).splitlines()[0]}")
    if estimates.shape != (n_expected,):
        fail(f"{path.name} has shape {estimates.shape}, expected ({n_expected},)")
    if not np.issubdtype(estimates.dtype, np.number) or not np.all(np.isfinite(estimates)):
        fail(f"{path.name} must hold finite numbers")
    return estimates.astype(np.float64)


def auuc(estimates: np.ndarray, tau: np.ndarray, treatment: np.ndarray, outcome: np.ndarray) -> float:
    # causalml's metrics import matplotlib, which writes a font cache under $HOME: keep it in a scratch folder
    with tempfile.TemporaryDirectory(prefix="mplconfig-") as scratch:
        os.environ["MPLCONFIGDIR"] = scratch
        from causalml.metrics import auuc_score

        frame = pd.DataFrame({"dragonnet": estimates, "tau": tau, "w": treatment, "y": outcome})
        return float(auuc_score(frame)["dragonnet"])


def main() -> None:
    args = harness_args()
    for name in ("workspace", "out", "private", "result"):
        if getattr(args, name) is None:
            fail(f"--{name} is required")
    if args.split == "val":
        try:
            split = load_split_config(args.workspace)
        except Exception as exc:  # a broken editable split_config.json is the experiment's failure
            fail(f"split_config.json is invalid: {str(exc).splitlines()[0]}")
        tau = np.load(args.private / "visible_tau.npy", allow_pickle=False)
        _, scored = ihdp.visible_split(len(tau), split.val_ratio, split.val_seed)
        tau, treatment, outcome = (np.load(args.private / f"visible_{column}.npy", allow_pickle=False)[scored]
                                   for column in ("tau", "treatment", "y_factual"))
    else:
        tau, treatment, outcome = (np.load(args.private / f"test_{column}.npy", allow_pickle=False)
                                   for column in ("tau", "treatment", "y_factual"))
    estimates = load_estimates(args.out / "ite_predictions.npy", len(tau))
    ate = float(estimates.mean())
    means = {
        "ate_mean": ate,
        "mae_mean": float(np.mean(np.abs(tau - estimates))),
        "mse_mean": float(np.mean((tau - estimates) ** 2)),
        "auuc_mean": auuc(estimates, tau, treatment, outcome),
        "abs_pct_error_of_ate_mean": float(abs(ate / tau.mean() - 1)),
    }
    write_result(
        args.result,
        {DATASET: means},
        stderrs={DATASET: {key.replace("_mean", "_stderr"): 0.0 for key in means}},
        info={"split": args.split, "n_scored": len(tau), "true_ate": float(tau.mean())},
    )
    print(f"{args.split}: MAE {means['mae_mean']:.4f} over {len(tau)} units, ATE {ate:.4f} "
          f"(true {tau.mean():.4f}), AUUC {means['auuc_mean']:.4f}")


if __name__ == "__main__":
    main()
