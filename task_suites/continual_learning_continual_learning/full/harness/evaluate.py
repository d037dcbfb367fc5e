"""Score one split MNIST run: average accuracy over the five contexts, from the run's labels and the labels in
PRIVATE only.

After the last context the run labelled every scored image (OUT/predictions.npy, digits 0..9, in the order the
harness handed the images over). Each context's accuracy is the fraction of its images (the digits of its two
classes) labelled right; average_acc is their mean, as the original's script computes it. Writes the original's
results layout: {"splitMNIST_scenario_class": {"means": {"average_acc_mean"}, "stderrs": {"average_acc_stderr"}}}.
"""

from __future__ import annotations

import numpy as np

from pytest_fmlbench.evalkit import fail, harness_args, load_labels, write_result
from pytest_fmlbench.taskkit import splitmnist

DATASET = "splitMNIST_scenario_class"


def main() -> None:
    args = harness_args()
    for name in ("out", "private", "result"):
        if getattr(args, name) is None:
            fail(f"--{name} is required")
    truth = args.private / f"{args.split}_labels.npy"
    if not truth.is_file():
        fail(f"{truth} is missing: run prepare.py first")
    labels = np.load(truth, allow_pickle=False)
    predictions = load_labels(args.out / "predictions.npy", len(labels), splitmnist.NUM_CLASSES)
    accuracies = splitmnist.context_accuracies(predictions, labels)
    write_result(args.result, {DATASET: {"average_acc_mean": sum(accuracies) / splitmnist.CONTEXTS}},
                 stderrs={DATASET: {"average_acc_stderr": 0.0}},
                 info={"split": args.split, "n_eval": len(labels), "context_accuracies": accuracies})


if __name__ == "__main__":
    main()
