"""Score one run of the Fairlearn task: fairlearn's demographic parity difference between the sexes of its
predictions (the metric), with the original's other numbers beside it, against labels from PRIVATE only.

Writes the original's results layout: {"adult": {"means": {"abs_demographic_parity_diff_mean", ...}}}.
As in the original there is no accuracy floor: the metric alone is scored.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from fairlearn.metrics import demographic_parity_difference, equalized_odds_difference
from sklearn.metrics import accuracy_score, balanced_accuracy_score

from pytest_fmlbench.evalkit import (
    fail,
    harness_args,
    load_labels,
    load_split_config,
    original_stratified_split_indices,
    write_result,
)

DATASET = "adult"
SENSITIVE, LABEL = "sex", "class"


def truth(args) -> pd.DataFrame:
    """The scored rows' sex and label, in the order the run predicted them."""
    if args.split == "test":
        return pd.read_csv(args.private / "test_labels.csv")
    pool = pd.read_csv(args.private / "visible_labels.csv")
    try:
        split_config = load_split_config(args.workspace)
    except Exception as exc:  # a broken editable split_config.json is the experiment's failure
        fail(f"split_config.json is invalid: {str(exc).splitlines()[0]}")
    _, val = original_stratified_split_indices(pool[LABEL].to_numpy(), split_config)
    return pool.iloc[val].reset_index(drop=True)


def main() -> None:
    args = harness_args()
    for name in ("out", "private", "result") + (("workspace",) if args.split == "val" else ()):
        if getattr(args, name) is None:
            fail(f"--{name} is required")
    rows = truth(args)
    y, sex = rows[LABEL].to_numpy(), rows[SENSITIVE].astype(str).to_numpy()
    pred = load_labels(args.out / "predictions.npy", len(y), n_classes=2)

    dpd = float(demographic_parity_difference(y, pred, sensitive_features=sex))
    eod = float(equalized_odds_difference(y, pred, sensitive_features=sex))
    accuracy = float(accuracy_score(y, pred))
    rates = {group: float(pred[sex == group].mean()) for group in np.unique(sex)}
    # standard errors: a difference of two groups' independent selection rates; binomial for accuracy
    stderr_dpd = float(np.sqrt(sum(r * (1 - r) / np.sum(sex == g) for g, r in rates.items())))
    stderr_acc = float(np.sqrt(accuracy * (1 - accuracy) / len(y)))
    means = {
        "accuracy_mean": accuracy,
        "balanced_accuracy_mean": float(balanced_accuracy_score(y, pred)),
        "equalized_odds_diff_mean": eod,
        "demographic_parity_diff_mean": dpd,
        "abs_equalized_odds_diff_mean": abs(eod),
        "abs_demographic_parity_diff_mean": abs(dpd),
    }
    write_result(
        args.result,
        {DATASET: means},
        stderrs={DATASET: {"abs_demographic_parity_diff_stderr": stderr_dpd, "accuracy_stderr": stderr_acc}},
        info={"split": args.split, "n_eval": len(y), "selection_rate": rates},
    )


if __name__ == "__main__":
    main()
