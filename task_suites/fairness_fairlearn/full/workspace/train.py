"""Experiment driver (protected): FML-bench's Fairness_fairlearn protocol on Adult.

    python train.py --split val  --out OUT   fit FairnessAlgorithm on the train part of data/ (split_config.json's
                                             stratified cut), pickle it to model_checkpoint/model.pkl, predict
                                             the val part
    python train.py --split test --out OUT   load model_checkpoint/model.pkl (no training), predict the hidden
                                             test rows in OUT/test_inputs.csv.gz

Writes OUT/predictions.npy (int8, 0/1, one per scored row, in order) and OUT/run_info.json. The evaluator
alone holds the labels and the sexes of the scored rows.
"""

from __future__ import annotations

import pickle
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from pytest_fmlbench.evalkit import harness_args, load_split_config, original_stratified_split_indices, write_json

import algorithm  # the editable method, next to this file

SENSITIVE, LABEL = "sex", "class"
CHECKPOINT = Path("model_checkpoint") / "model.pkl"

warnings.filterwarnings("ignore")  # as the original: scikit-learn's convergence chatter is not the run's output


def predictions(model, features: pd.DataFrame) -> np.ndarray:
    pred = np.asarray(model.predict(features)).reshape(-1)
    if pred.shape != (len(features),) or not np.isin(pred, (0, 1)).all():
        sys.exit(f"train.py: predict() must return {len(features)} labels in {{0, 1}}, got shape {pred.shape}")
    return pred.astype(np.int8)


def main() -> None:
    args = harness_args()
    if args.out is None:
        sys.exit("train.py: --out is required")
    np.random.seed(42)
    args.out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    if args.split == "val":
        pool = pd.read_csv("data/visible.csv.gz")
        labels = pool.pop(LABEL)
        sex = pool.pop(SENSITIVE).astype("category")
        train, val = original_stratified_split_indices(labels.to_numpy(), load_split_config(Path.cwd()))
        print(f"train {len(train)}, val {len(val)} (the hidden test is not here)", flush=True)
        model = algorithm.FairnessAlgorithm()
        model.fit(pool.iloc[train], labels.iloc[train], sensitive_features=sex.iloc[train])
        CHECKPOINT.parent.mkdir(exist_ok=True)
        with open(CHECKPOINT, "wb") as fh:
            pickle.dump(model, fh)
        scored = pool.iloc[val]
        n_train = len(train)
    else:
        if not CHECKPOINT.is_file():
            sys.exit(f"train.py: no {CHECKPOINT}: the test run needs the val run's checkpoint")
        with open(CHECKPOINT, "rb") as fh:
            model = pickle.load(fh)
        scored = pd.read_csv(args.out / "test_inputs.csv.gz")
        n_train = None
    pred = predictions(model, scored)
    np.save(args.out / "predictions.npy", pred)
    seconds = time.perf_counter() - start
    write_json(args.out / "run_info.json", {"split": args.split, "n_train": n_train, "n_scored": len(scored),
                                            "seconds": seconds})
    # selection rates need no labels; the metric comes from the evaluator
    if "sex_Male" in scored:
        rates = pd.Series(pred).groupby(np.where(scored["sex_Male"].to_numpy(), "Male", "Female")).mean()
        print("selection rate by sex: " + ", ".join(f"{g} {r:.3f}" for g, r in rates.items()), flush=True)
    print(f"[{args.split}] predicted {len(scored)} rows in {seconds:.1f}s", flush=True)


if __name__ == "__main__":
    main()
