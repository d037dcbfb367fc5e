"""Score the fairness_and_bias_aif360 experiment with AIF360's ClassificationMetric.

Reads OUT/predictions.npy (predicted two_year_recid, one per evaluated row in file order) and the true
rows from PRIVATE (written by prepare.py; never from the workspace or anything the experiment wrote);
for the val split the workspace's split_config.json says which visible rows were held out. The metric
is the original's abs_aod = |average odds difference| between men (unprivileged) and women
(privileged), lower is better; accuracy, balanced accuracy, disparate impact, equal opportunity
difference and the Theil index are reported as the original does.

Constraint "accuracy_floor", as in the original: on val the accuracy must not fall below the baseline's
val accuracy at all; on the hidden test it may fall at most 0.01 below it.
"""

from __future__ import annotations

import logging
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compas_like import LABEL, to_aif360  # noqa: E402

from pytest_fmlbench.evalkit import (  # noqa: E402
    ConstraintOutcome,
    fail,
    harness_args,
    load_labels,
    load_split_config,
    split_indices,
    write_result,
)

DATASET = "compas_like"
PRIVILEGED, UNPRIVILEGED = [{"sex": 1}], [{"sex": 0}]
BASELINE_VAL_ACCURACY = 2385 / 3694  # the baseline's val accuracy (2,385 of the 3,694 default val rows)
TEST_TOLERANCE = 0.01


def _truth(args) -> pd.DataFrame:
    if args.split == "test":
        return pd.read_csv(args.private / "test.csv")
    visible = pd.read_csv(args.private / "visible.csv")
    _, val_rows = split_indices(len(visible), load_split_config(args.workspace))
    return visible.iloc[val_rows].reset_index(drop=True)


def main() -> None:
    args = harness_args()
    for name in ("out", "private", "result") + (("workspace",) if args.split == "val" else ()):
        if getattr(args, name) is None:
            fail(f"--{name} is required")
    try:
        truth_table = _truth(args)
    except (OSError, ValueError) as exc:
        fail(f"cannot load the labels or split_config.json: {str(exc).splitlines()[0]}")
    predictions = load_labels(args.out / "predictions.npy", len(truth_table), n_classes=2)

    logging.disable(logging.WARNING)  # AIF360 warns at import about optional extras (tensorflow, ...)
    from aif360.metrics import ClassificationMetric

    truth = to_aif360(truth_table)
    if not np.array_equal(truth.labels.ravel(), truth_table[LABEL].to_numpy(dtype=float)):
        fail("internal: the AIF360 dataset does not keep the rows in file order")
    predicted = truth.copy(deepcopy=True)
    predicted.labels = predictions.astype(np.float64).reshape(-1, 1)
    cm = ClassificationMetric(truth, predicted, unprivileged_groups=UNPRIVILEGED, privileged_groups=PRIVILEGED)

    accuracy = float(cm.accuracy())
    disparate_impact = float(cm.disparate_impact())
    eod, aod, theil = float(cm.equal_opportunity_difference()), float(cm.average_odds_difference()), float(cm.theil_index())
    means = {
        "abs_aod": abs(aod), "aod": aod, "cls_acc": accuracy,
        "balanced_cls_acc": 0.5 * float(cm.true_positive_rate() + cm.true_negative_rate()),
        "disparate_impact": disparate_impact, "abs_disparate_impact_diff": abs(disparate_impact - 1),
        "eod": eod, "abs_eod": abs(eod), "theil_index": theil,
    }
    means = {k: v for k, v in means.items() if math.isfinite(v)}  # disparate impact is inf if no woman is favoured
    if "abs_aod" not in means:
        fail("average odds difference is undefined (a group has no favourable or no unfavourable true label)")

    floor = BASELINE_VAL_ACCURACY - (TEST_TOLERANCE if args.split == "test" else 0.0)
    constraint = ConstraintOutcome(
        name="accuracy_floor", ok=accuracy >= floor - 1e-12, value=accuracy, limit=floor,
        detail=f"accuracy {accuracy:.4f} must be >= {floor:.4f} (the baseline's val accuracy"
               + (f" minus {TEST_TOLERANCE})" if args.split == "test" else ")"),
    )
    write_result(
        args.result,
        {DATASET: means},
        stderrs={DATASET: {"cls_acc": math.sqrt(accuracy * (1 - accuracy) / len(truth_table))}},
        constraints=[constraint],
        info={"split": args.split, "n": len(truth_table)},
    )


if __name__ == "__main__":
    main()
