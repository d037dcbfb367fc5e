import sys

import numpy as np

from pytest_fmlbench.evalkit import harness_args, load_split_config, split_indices, write_result

args = harness_args()
if args.split == "val":
    labels = np.load(args.private / "dev_labels.npy")
    labels = labels[split_indices(len(labels), load_split_config(args.workspace))[1]]
else:
    labels = np.load(args.private / "test_labels.npy")
try:
    pred = np.load(args.out / "predictions.npy")
except (OSError, ValueError) as exc:
    sys.exit(f"no readable predictions.npy: {exc}")
if pred.shape != labels.shape:
    sys.exit(f"predictions have shape {pred.shape}, expected {labels.shape}")
write_result(args.result, {"blobs": {"accuracy": float((pred == labels).mean())}})
