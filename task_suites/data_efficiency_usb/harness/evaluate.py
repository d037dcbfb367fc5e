"""Score one semi-supervised experiment: accuracy of its predictions.

--split val : OUT/predictions.npy holds one label per validation example, i.e. per row of the unlabeled
              pool that split_config.json holds out, in pool order; scored against the pool's labels,
              which only PRIVATE holds.
--split test: one label per hidden test digit (OUT/test_X.npy order).
The metric is test_acc on both splits (on val it is the validation accuracy), as in the original.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np

from pytest_fmlbench.evalkit import (
    fail,
    harness_args,
    load_labels,
    load_split_config,
    split_indices,
    write_result,
)

NUM_CLASSES = 10  # the digits; kept here so scoring needs no data recipe
DATASET = "digits_ssl"


def private_labels(path: Path) -> np.ndarray:
    if not path.is_file():
        fail(f"{path} is missing: run prepare.py first")
    return np.load(path, allow_pickle=False)


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
        pool_y = private_labels(args.private / "unlabeled_y.npy")
        labels = pool_y[split_indices(len(pool_y), split_config)[1]]
    else:
        labels = private_labels(args.private / "test_y.npy")
    pred = load_labels(args.out / "predictions.npy", len(labels), NUM_CLASSES)
    accuracy = float(np.mean(pred == labels))
    write_result(
        args.result,
        {DATASET: {"test_acc": accuracy}},
        stderrs={DATASET: {"test_acc": math.sqrt(accuracy * (1 - accuracy) / len(labels))}},
        info={"split": args.split, "n_eval": len(labels)},
    )


if __name__ == "__main__":
    main()
