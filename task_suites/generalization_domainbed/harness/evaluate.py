"""Score one DomainBed experiment on ColoredMNIST-on-digits (test environment 2).

OUT/predictions.npy holds the experiment's class predictions for the held-out environment's images of the
split: on val its validation part (WORKSPACE/data/val_X.npy, DomainBed's test-domain "oracle" validation,
the original's env2_out_acc), on test the rest of it (the original's env2_in_acc). in_acc is their accuracy.
Labels come from PRIVATE only; the predictions are untrusted input, read with allow_pickle=False.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from layout import NUM_CLASSES, TEST_ENV  # noqa: E402

from pytest_fmlbench.evalkit import fail, harness_args, load_labels, write_result  # noqa: E402

DATASET = f"ColoredMNIST_test_env{TEST_ENV}"
LABELS = {"val": "val_y.npy", "test": "test_y.npy"}
PROTOCOL = {"val": "test-domain validation (held-out part of env 2)", "test": "the rest of env 2"}


def main() -> None:
    args = harness_args()
    for name in ("out", "private", "result"):
        if getattr(args, name) is None:
            fail(f"--{name} is required")
    labels_path = args.private / LABELS[args.split]
    if not labels_path.is_file():
        fail(f"{labels_path} is missing: run prepare.py first")
    y = np.load(labels_path, allow_pickle=False)
    pred = load_labels(args.out / "predictions.npy", len(y), NUM_CLASSES)
    acc = float(np.mean(pred == y))
    means = {"in_acc": acc, f"env{TEST_ENV}_{args.split}_acc": acc}
    stderrs = {"in_acc": math.sqrt(acc * (1 - acc) / len(y))}
    info = {"split": args.split, "held_out_env": TEST_ENV, "protocol": PROTOCOL[args.split], "n_eval": len(y)}
    write_result(args.result, {DATASET: means}, stderrs={DATASET: stderrs}, info=info)


if __name__ == "__main__":
    main()
