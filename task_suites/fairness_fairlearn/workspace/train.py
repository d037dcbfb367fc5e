"""Experiment driver (protected): python train.py --split {val|test} --out DIR

Trains algorithm.fit_predict on the train part of data/visible.csv (cut by split_config.json) and
writes its predictions for the evaluation rows to DIR/predictions.npy:
  --split val   the val part of data/visible.csv, in file order;
  --split test  the hidden test rows in DIR/test_inputs.csv (written there by the harness), in file order.
The harness scores the predictions against labels it keeps to itself.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pandas as pd

import algorithm
from pytest_fmlbench.evalkit import harness_args, load_split_config, split_indices, write_json

FEATURES = [
    "age",
    "workclass",
    "education_num",
    "marital_status",
    "relationship",
    "occupation",
    "hours_per_week",
    "capital_gain",
    "capital_loss",
]
SENSITIVE = "sex"
LABEL = "income"


def main() -> None:
    args = harness_args()
    if args.out is None:
        raise SystemExit("train.py: --out is required")
    here = Path(__file__).resolve().parent
    config = json.loads((here / "config.json").read_text())
    visible = pd.read_csv(here / "data" / "visible.csv")
    train_rows, val_rows = split_indices(len(visible), load_split_config(here))
    train = visible.iloc[train_rows].reset_index(drop=True)
    if args.split == "val":
        evaluation = visible.iloc[val_rows].drop(columns=[LABEL]).reset_index(drop=True)
    else:
        evaluation = pd.read_csv(args.out / "test_inputs.csv")

    start = time.perf_counter()
    predictions = algorithm.fit_predict(
        train[FEATURES],
        train[LABEL].to_numpy(),
        train[SENSITIVE],
        evaluation[FEATURES],
        evaluation[SENSITIVE],
        config,
    )
    seconds = time.perf_counter() - start

    predictions = np.asarray(predictions).reshape(-1)
    if predictions.shape != (len(evaluation),) or not np.isin(predictions, (0, 1)).all():
        raise SystemExit(f"train.py: fit_predict must return {len(evaluation)} predictions in {{0, 1}}")
    args.out.mkdir(parents=True, exist_ok=True)
    np.save(args.out / "predictions.npy", predictions.astype(np.int8))
    write_json(
        args.out / "run_info.json",
        {"split": args.split, "n_train": len(train), "n_eval": len(evaluation), "fit_seconds": seconds},
    )

    # Selection rates need no labels; accuracy and the official metric come from the evaluator.
    rates = pd.Series(predictions).groupby(evaluation[SENSITIVE].to_numpy()).mean()
    print(f"[{args.split}] trained on {len(train)} rows in {seconds:.1f}s; predicted {len(evaluation)} rows")
    print("selection rate by sex: " + ", ".join(f"{g}={r:.3f}" for g, r in rates.items()))


if __name__ == "__main__":
    main()
