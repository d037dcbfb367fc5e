"""Experiment driver (protected): python train.py --split {val|test} --out DIR

Builds AIF360 datasets the way the original's load_preproc_data_compas() does (a StandardDataset;
protected attributes sex and race, privileged Female and Caucasian; one-hot age_cat, priors_count and
c_charge_degree; favourable label two_year_recid = 0), fits algorithm.AdversarialDebiasing on the train
part of data/visible.csv (cut by split_config.json), and writes its predicted two_year_recid for the
evaluation rows to DIR/predictions.npy (int8, in file order):
  --split val   the val part of data/visible.csv;
  --split test  the hidden test rows in DIR/test_inputs.csv (no labels; written by the harness).
As in the original, the evaluation dataset reaches predict() with its labels and scores zeroed. The
harness computes accuracy and the fairness metrics from labels it keeps to itself.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from pytest_fmlbench.evalkit import harness_args, load_split_config, split_indices, write_json

logging.disable(logging.WARNING)  # AIF360 warns at import about optional extras (tensorflow, ...)
from aif360.datasets import StandardDataset  # noqa: E402

import algorithm  # noqa: E402

COLUMNS = ["sex", "race", "age_cat", "priors_count", "c_charge_degree"]
LABEL = "two_year_recid"
PRIVILEGED, UNPRIVILEGED = [{"sex": 1}], [{"sex": 0}]


def to_aif360(table: pd.DataFrame) -> StandardDataset:
    return StandardDataset(
        table[COLUMNS + [LABEL]].copy(),
        label_name=LABEL,
        favorable_classes=[0],
        protected_attribute_names=["sex", "race"],
        privileged_classes=[[1.0], [1.0]],
        categorical_features=["age_cat", "priors_count", "c_charge_degree"],
        features_to_keep=COLUMNS + [LABEL],
        metadata={"label_maps": [{1.0: "Did recid.", 0.0: "No recid."}],
                  "protected_attribute_maps": [{0.0: "Male", 1.0: "Female"}, {1.0: "Caucasian", 0.0: "Not Caucasian"}]},
    )


def main() -> None:
    args = harness_args()
    if args.out is None:
        raise SystemExit("train.py: --out is required")
    # One intra-op thread: a 200-unit MLP on a few thousand rows gains nothing from more, and results stay bit-identical.
    torch.set_num_threads(1)
    here = Path(__file__).resolve().parent
    config = json.loads((here / "config.json").read_text())
    visible = pd.read_csv(here / "data" / "visible.csv")
    train_rows, val_rows = split_indices(len(visible), load_split_config(here))
    train = to_aif360(visible.iloc[train_rows].reset_index(drop=True))
    if args.split == "val":
        evaluation = visible.iloc[val_rows][COLUMNS].reset_index(drop=True)
    else:
        evaluation = pd.read_csv(args.out / "test_inputs.csv")[COLUMNS]
    # no labels for the evaluation rows: predict() must not be able to echo them back. With a constant
    # placeholder label StandardDataset would pick its own 1/0 coding, so the training set's is restored.
    blind = to_aif360(evaluation.assign(**{LABEL: 0}))
    blind.labels = np.zeros_like(blind.labels)
    blind.scores = np.zeros_like(blind.scores)
    blind.favorable_label, blind.unfavorable_label = train.favorable_label, train.unfavorable_label

    start = time.perf_counter()
    model = algorithm.AdversarialDebiasing(unprivileged_groups=UNPRIVILEGED, privileged_groups=PRIVILEGED, config=config)
    model.fit(train)
    predicted = model.predict(blind)
    seconds = time.perf_counter() - start

    labels = np.asarray(predicted.labels).reshape(-1)
    if labels.shape != (len(evaluation),) or not np.isin(labels, (0, 1)).all():
        raise SystemExit(f"train.py: predict() must return a dataset with {len(evaluation)} labels in {{0, 1}}")
    args.out.mkdir(parents=True, exist_ok=True)
    np.save(args.out / "predictions.npy", labels.astype(np.int8))
    write_json(args.out / "run_info.json",
               {"split": args.split, "n_train": len(train_rows), "n_eval": len(evaluation), "fit_seconds": seconds})
    # favourable-prediction rates need no labels; accuracy and the fairness metrics come from the evaluator
    favoured = pd.Series(labels == 0).groupby(evaluation["sex"].map({0.0: "Male", 1.0: "Female"})).mean()
    print(f"[{args.split}] trained on {len(train_rows)} rows in {seconds:.1f}s; predicted {len(evaluation)} rows")
    print("predicted no-recidivism rate by sex: " + ", ".join(f"{g}={r:.3f}" for g, r in favoured.items()))


if __name__ == "__main__":
    main()
