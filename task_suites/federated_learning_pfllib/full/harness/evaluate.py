"""Score one federated CIFAR-10 run: the mean over clients of each client's accuracy, from the run's labels and the
labels the harness keeps.

The run labelled every scored image (OUT/predictions.npy, classes 0..9) with the trained global model: for val,
each client's val cut of its visible pool, client after client, in the order the original's split_dataset draws
it from split_config.json (recomputed here from the workspace's file); for test, OUT/test_images.npy in the order
the harness handed it over. Each client's accuracy is the fraction of its images labelled right; test_acc is
their mean and test_acc_std their standard deviation, over the clients with scored images, as the original's
script computes them. Writes the original's results layout:
{"cifar10_fl": {"means": {"test_acc_mean", "test_acc_std_mean"}, "stderrs": {...}}}.
"""

from __future__ import annotations

import numpy as np

from pytest_fmlbench.evalkit import fail, harness_args, load_labels, load_split_config, original_split_indices, write_result
from pytest_fmlbench.taskkit import pfllib

DATASET = "cifar10_fl"


def val_positions(owners: np.ndarray, workspace) -> np.ndarray:
    config = load_split_config(workspace)
    positions = []
    for client in range(pfllib.NUM_CLIENTS):
        mine = np.flatnonzero(owners == client)
        _, val = original_split_indices(len(mine), config)
        positions.append(mine[val])
    return np.concatenate(positions)


def main() -> None:
    args = harness_args()
    for name in ("out", "private", "result"):
        if getattr(args, name) is None:
            fail(f"--{name} is required")
    part = "visible" if args.split == "val" else "test"
    truth = args.private / f"{part}_labels.npy"
    if not truth.is_file():
        fail(f"{truth} is missing: run prepare.py first")
    labels = np.load(truth, allow_pickle=False)
    owners = np.load(args.private / f"{part}_client.npy", allow_pickle=False)
    if args.split == "val":
        if args.workspace is None:
            fail("--workspace is required for --split val")
        try:
            scored = val_positions(owners, args.workspace)
        except (OSError, ValueError) as exc:
            fail(f"split_config.json: {str(exc).splitlines()[0]}")
        labels, owners = labels[scored], owners[scored]
    predictions = load_labels(args.out / "predictions.npy", len(labels), pfllib.NUM_CLASSES)
    accuracies = pfllib.client_accuracies(predictions, labels, owners)
    write_result(args.result,
                 {DATASET: {"test_acc_mean": float(np.mean(accuracies)), "test_acc_std_mean": float(np.std(accuracies))}},
                 stderrs={DATASET: {"test_acc_stderr": 0.0, "test_acc_std_stderr": 0.0}},
                 info={"split": args.split, "n_eval": len(labels), "client_accuracies": accuracies})


if __name__ == "__main__":
    main()
