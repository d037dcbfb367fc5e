"""Experiment driver (protected): python train.py --split {val|test} --out DIR

For each replication of the simulated outcomes (the columns y_0, y_1, ... of data/visible.csv), fits
algorithm.estimate_ite on the train part of data/visible.csv (cut by split_config.json) with that
replication's outcome, and writes the individual treatment-effect estimates for the evaluation units to
DIR/ite.npy (float64, one row per replication, the units in file order):
  --split val   the val part of data/visible.csv;
  --split test  the hidden test units in DIR/test_covariates.csv (covariates only; written by the harness).
The harness scores them against the true effects, which it keeps to itself.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

import algorithm
from pytest_fmlbench.evalkit import harness_args, load_split_config, split_indices, write_json


def main() -> None:
    args = harness_args()
    if args.out is None:
        raise SystemExit("train.py: --out is required")
    # One intra-op thread: on a few hundred rows more threads buy nothing, and results stay bit-identical.
    torch.set_num_threads(1)
    here = Path(__file__).resolve().parent
    config = json.loads((here / "config.json").read_text())
    visible = pd.read_csv(here / "data" / "visible.csv")
    outcomes = [c for c in visible.columns if c.startswith("y_")]  # y_0, y_1, ...: one per replication
    covariates = [c for c in visible.columns if c != "treatment" and c not in outcomes]
    train_rows, val_rows = split_indices(len(visible), load_split_config(here))
    train = visible.iloc[train_rows].reset_index(drop=True)
    if args.split == "val":
        evaluation = visible.iloc[val_rows][covariates].reset_index(drop=True)
    else:
        evaluation = pd.read_csv(args.out / "test_covariates.csv")[covariates]

    start = time.perf_counter()
    estimates = []
    for outcome in outcomes:
        ite = algorithm.estimate_ite(train[covariates], train["treatment"].to_numpy(), train[outcome].to_numpy(),
                                     evaluation, config)
        ite = np.asarray(ite, dtype=np.float64).reshape(-1)
        if ite.shape != (len(evaluation),) or not np.all(np.isfinite(ite)):
            raise SystemExit(f"train.py: estimate_ite must return {len(evaluation)} finite numbers ({outcome})")
        estimates.append(ite)
    seconds = time.perf_counter() - start

    args.out.mkdir(parents=True, exist_ok=True)
    np.save(args.out / "ite.npy", np.stack(estimates))
    write_json(args.out / "run_info.json", {"split": args.split, "n_train": len(train), "n_eval": len(evaluation),
                                            "replications": len(outcomes), "fit_seconds": seconds})
    print(f"[{args.split}] fitted {len(outcomes)} replications on {len(train)} units in {seconds:.1f}s; estimated "
          f"ATE over {len(evaluation)} evaluation units: " + ", ".join(f"{ite.mean():.4f}" for ite in estimates))


if __name__ == "__main__":
    main()
