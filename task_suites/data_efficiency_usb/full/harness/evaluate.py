"""Score one semi-supervised run: the accuracy of its predictions, with labels from PRIVATE only.

Writes the original's results layout: {"cifar100_ssl": {"means": {"test_acc_mean"}}} (on the val split,
the val accuracy under the same key, as the original).
"""

from __future__ import annotations

import numpy as np

from pytest_fmlbench.evalkit import fail, harness_args, load_labels, write_result

DATASET = "cifar100_ssl"
NUM_CLASSES = 100


def main() -> None:
    args = harness_args()
    for name in ("out", "private", "result"):
        if getattr(args, name) is None:
            fail(f"--{name} is required")
    truth = args.private / f"{args.split}_labels.npy"
    if not truth.is_file():
        fail(f"{truth} is missing: run prepare.py first")
    labels = np.load(truth, allow_pickle=False)
    pred = load_labels(args.out / "predictions.npy", len(labels), NUM_CLASSES)
    accuracy = float(np.mean(pred == labels))
    write_result(args.result, {DATASET: {"test_acc_mean": accuracy}},
                 stderrs={DATASET: {"test_acc_stderr": 0.0}}, info={"split": args.split, "n_eval": len(labels)})


if __name__ == "__main__":
    main()
