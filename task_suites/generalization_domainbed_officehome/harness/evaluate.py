"""Score one DomainBed experiment on the OfficeHome-like digit domains (held-out domain: Art).

--split val : DomainBed's training-domain validation. OUT/predictions.npy holds the predictions for
              the out-split of each training domain (the rows split_config.json holds out), in domain
              order (Clipart, Product, RealWorld); avg_acc is the mean of the per-domain accuracies, as
              DomainBed's IIDAccuracySelectionMethod averages env{i}_out_acc over the training domains.
--split test: avg_acc is the accuracy on the held-out domain, Art (env 0).
Labels come from PRIVATE only; the predictions are untrusted input, read with allow_pickle=False.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from layout import ENVIRONMENTS, NUM_CLASSES, TEST_ENV, TRAIN_ENVS  # noqa: E402

from pytest_fmlbench.evalkit import (  # noqa: E402
    fail,
    harness_args,
    load_labels,
    load_split_config,
    split_indices,
    write_result,
)

DATASET = f"OfficeHome_test_env{TEST_ENV}"
METRIC = "avg_acc"


def private_labels(path: Path) -> np.ndarray:
    if not path.is_file():
        fail(f"{path} is missing: run prepare.py first")
    return np.load(path, allow_pickle=False)


def binomial_stderr(accuracy: float, n: int) -> float:
    return math.sqrt(accuracy * (1 - accuracy) / n)


def main() -> None:
    args = harness_args()
    for name in ("workspace", "out", "private", "result"):
        if getattr(args, name) is None:
            fail(f"--{name} is required")

    if args.split == "val":
        try:
            split_config = load_split_config(args.workspace)
        except Exception as exc:  # a broken editable split_config.json is the experiment's failure
            fail(f"split_config.json is invalid: {str(exc).splitlines()[0]}")
        labels = {}
        for e in TRAIN_ENVS:
            y = private_labels(args.private / f"env{e}_y.npy")
            labels[e] = y[split_indices(len(y), split_config)[1]]
        pred = load_labels(args.out / "predictions.npy", sum(len(v) for v in labels.values()), NUM_CLASSES)
        means, stderrs, start = {}, {}, 0
        for e, y in labels.items():
            acc = float(np.mean(pred[start:start + len(y)] == y))
            means[f"env{e}_out_acc"], stderrs[f"env{e}_out_acc"] = acc, binomial_stderr(acc, len(y))
            start += len(y)
        means[METRIC] = float(np.mean([means[f"env{e}_out_acc"] for e in TRAIN_ENVS]))
        stderrs[METRIC] = math.sqrt(sum(stderrs[f"env{e}_out_acc"] ** 2 for e in TRAIN_ENVS)) / len(TRAIN_ENVS)
        info = {"split": "val", "protocol": "training-domain validation",
                "n_eval": {ENVIRONMENTS[e]: len(y) for e, y in labels.items()}}
    else:
        y = private_labels(args.private / "test_y.npy")
        pred = load_labels(args.out / "predictions.npy", len(y), NUM_CLASSES)
        acc = float(np.mean(pred == y))
        means = {METRIC: acc, f"env{TEST_ENV}_acc": acc}
        stderrs = {METRIC: binomial_stderr(acc, len(y))}
        info = {"split": "test", "held_out_domain": ENVIRONMENTS[TEST_ENV], "n_eval": len(y)}
    write_result(args.result, {DATASET: means}, stderrs={DATASET: stderrs}, info=info)


if __name__ == "__main__":
    main()
