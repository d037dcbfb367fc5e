"""Score one run of the AIF360 task with AIF360's ClassificationMetric from the verified checkout (the original
restores AIF360's classification_metric.py before every run), against labels from PRIVATE only.

Writes the original's results layout: {"compas": {"means": {"abs_aod_mean", "cls_acc_mean", ...}}}, and the
original's accuracy constraint: on val the accuracy must reach the original's baseline_cls_acc (0.6351...);
on the test, that less 0.01 (where the original reports the baseline's fairness instead, scoring no gain).
"""

from __future__ import annotations

import importlib
import math

import pandas as pd

from pytest_fmlbench.evalkit import ConstraintOutcome, fail, harness_args, load_labels, write_result
from pytest_fmlbench.taskkit import compas

DATASET = "compas"
CHECKOUT = ("aif360", "src")
BASELINE_CLS_ACC = 0.63510101010101  # the original's train_eval_baseline.py
TEST_TOLERANCE = 0.01
PRIVILEGED, UNPRIVILEGED = [{"sex": 1}], [{"sex": 0}]


def main() -> None:
    args = harness_args()
    for name in ("out", "private", "result", "data"):
        if getattr(args, name) is None:
            fail(f"--{name} is required")
    truth = pd.read_csv(args.private / f"{args.split}_truth.csv", index_col="id")
    pred = load_labels(args.out / "predictions.npy", len(truth), n_classes=2)
    with compas.aif360_from(args.data.joinpath(*CHECKOUT)):
        datasets = importlib.import_module("aif360.datasets")
        metrics = importlib.import_module("aif360.metrics")
        scored = datasets.BinaryLabelDataset(df=truth, label_names=[compas.LABEL],
                                             protected_attribute_names=list(compas.PROTECTED),
                                             favorable_label=compas.FAVORABLE, unfavorable_label=compas.UNFAVORABLE)
        classified = scored.copy(deepcopy=True)
        classified.labels = pred.astype(float).reshape(-1, 1)
        classified.scores = (classified.labels == compas.FAVORABLE).astype(float)
        cm = metrics.ClassificationMetric(scored, classified, unprivileged_groups=UNPRIVILEGED,
                                          privileged_groups=PRIVILEGED)
        accuracy = float(cm.accuracy())
        di, eod, aod, theil = (float(cm.disparate_impact()), float(cm.equal_opportunity_difference()),
                               float(cm.average_odds_difference()), float(cm.theil_index()))
        balanced = 0.5 * (float(cm.true_positive_rate()) + float(cm.true_negative_rate()))
    if not math.isfinite(aod):
        fail(f"the average odds difference is undefined ({aod}): a sex group lacks positive or negative rows")
    values = {"cls_acc_mean": accuracy, "balanced_cls_acc_mean": balanced, "disparate_impact_mean": di,
              "abs_disparate_impact_diff_mean": abs(di - 1), "eod_mean": eod, "abs_eod_mean": abs(eod),
              "aod_mean": aod, "abs_aod_mean": abs(aod), "theil_index_mean": theil, "abs_theil_index_mean": abs(theil)}
    means = {key: value for key, value in values.items() if math.isfinite(value)}
    floor = BASELINE_CLS_ACC - (TEST_TOLERANCE if args.split == "test" else 0.0)
    constraint = ConstraintOutcome(name="accuracy_floor", ok=accuracy >= floor, value=accuracy, limit=floor,
                                   detail=f"accuracy {accuracy:.4f} must be >= {floor:.4f} (the original's "
                                          f"baseline_cls_acc{' - 0.01 on the test' if args.split == 'test' else ''})")
    write_result(args.result, {DATASET: means},
                 stderrs={DATASET: {key.replace("_mean", "_stderr"): 0.0 for key in means}},
                 constraints=[constraint],
                 info={"split": args.split, "n_eval": len(truth),
                       "undefined": sorted(set(values) - set(means))})


if __name__ == "__main__":
    main()
