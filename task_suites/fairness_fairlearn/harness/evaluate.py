"""Score the fairness_fairlearn experiment.

Reads OUT/predictions.npy, the labels and sexes from PRIVATE (written by prepare.py; never from the
workspace or anything the experiment wrote) and, for the val split, the workspace's split_config.json
to recompute which visible rows were held out. Computes fairlearn's demographic parity difference
(the metric, lower is better) and accuracy, and checks the accuracy floor.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from fairlearn.metrics import demographic_parity_difference
from sklearn.metrics import accuracy_score

from pytest_fmlbench.evalkit import (
    ConstraintOutcome,
    fail,
    harness_args,
    load_labels,
    load_split_config,
    split_indices,
    write_result,
)

DATASET = "adult_like_synthetic"
# The unconstrained baseline reaches ~0.85 accuracy; a fair method may give up at most ~0.05 of it.
# Predicting "<=50K" for everyone would score 0 disparity at ~0.75 accuracy, which the floor rules out.
ACCURACY_FLOOR = 0.80


def _truth(args) -> pd.DataFrame:
    if args.split == "test":
        return pd.read_csv(args.private / "test_labels.csv")
    labels = pd.read_csv(args.private / "visible_labels.csv")
    _, val_rows = split_indices(len(labels), load_split_config(args.workspace))
    return labels.iloc[val_rows].reset_index(drop=True)


def main() -> None:
    args = harness_args()
    for name in ("out", "private", "result") + (("workspace",) if args.split == "val" else ()):
        if getattr(args, name) is None:
            fail(f"--{name} is required")
    try:
        truth = _truth(args)
    except (OSError, ValueError) as exc:
        fail(f"cannot load the labels or split_config.json: {exc}")
    y, sex = truth["income"].to_numpy(), truth["sex"].to_numpy()
    predictions = load_labels(args.out / "predictions.npy", len(y), n_classes=2)

    dpd = float(demographic_parity_difference(y, predictions, sensitive_features=sex))
    accuracy = float(accuracy_score(y, predictions))
    groups = {g: predictions[sex == g] for g in np.unique(sex)}
    rates = {g: float(p.mean()) for g, p in groups.items()}
    # Standard errors: binomial for accuracy; for the gap between two groups' selection rates, the
    # usual one for a difference of two independent proportions.
    stderr_dpd = float(np.sqrt(sum(r * (1 - r) / len(groups[g]) for g, r in rates.items())))
    stderr_acc = float(np.sqrt(accuracy * (1 - accuracy) / len(y)))

    floor = ConstraintOutcome(
        name="accuracy_floor",
        ok=accuracy >= ACCURACY_FLOOR,
        value=accuracy,
        limit=ACCURACY_FLOOR,
        detail=f"accuracy {accuracy:.4f} must be >= {ACCURACY_FLOOR}",
    )
    write_result(
        args.result,
        {DATASET: {"demographic_parity_difference": dpd, "accuracy": accuracy}},
        stderrs={DATASET: {"demographic_parity_difference": stderr_dpd, "accuracy": stderr_acc}},
        constraints=[floor],
        info={"split": args.split, "n": len(y), "selection_rate": rates},
    )


if __name__ == "__main__":
    main()
