"""Score one run's linear probe: the top-1 accuracy of its predictions, with labels from PRIVATE only.

For val, the labels of the val part of the visible pool (recomputed from the workspace's split_config.json,
in the order train.py predicts it); for test, the hidden test's. Writes the original's results layout:
{"cifar10_linear_probing": {"means": {"test_acc_mean"}}} (on the val split, the val accuracy under the same
key, as the original).
"""

from __future__ import annotations

import numpy as np

from pytest_fmlbench.evalkit import (
    OriginalSplitConfig,
    fail,
    harness_args,
    load_labels,
    load_split_config,
    original_split_indices,
    write_result,
)

DATASET = "cifar10_linear_probing"
NUM_CLASSES = 10


def _private(args, name: str) -> np.ndarray:
    path = args.private / name
    if not path.is_file():
        fail(f"{path} is missing: run prepare.py first")
    return np.load(path, allow_pickle=False)


def true_labels(args) -> np.ndarray:
    if args.split == "test":
        return _private(args, "test_labels.npy")
    visible = _private(args, "visible_labels.npy")
    try:
        config = load_split_config(args.workspace, OriginalSplitConfig)
    except Exception as exc:  # a broken editable split_config.json is the experiment's failure
        fail(f"split_config.json is invalid: {str(exc).splitlines()[0]}")
    _, val_pos = original_split_indices(len(visible), config)
    if len(val_pos) == 0:
        fail(f"split_config.json leaves no val image (val_ratio {config.val_ratio} of {len(visible)})")
    return visible[val_pos]


def main() -> None:
    args = harness_args()
    for name in ("out", "private", "result") + (("workspace",) if args.split == "val" else ()):
        if getattr(args, name) is None:
            fail(f"--{name} is required")
    labels = true_labels(args)
    predictions = load_labels(args.out / "predictions.npy", len(labels), NUM_CLASSES)
    accuracy = float(np.mean(predictions == labels))
    write_result(args.result, {DATASET: {"test_acc_mean": accuracy}},
                 stderrs={DATASET: {"test_acc_stderr": 0.0}}, info={"split": args.split, "n_eval": len(labels)})


if __name__ == "__main__":
    main()
