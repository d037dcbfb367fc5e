"""Score one DP-SGD run: accuracy of its predictions (labels from PRIVATE only), and the privacy budget
recomputed with Opacus's PRV accountant from the DP configuration the run recorded.

Writes the original's results layout: {"cifar10_dp": {"means": {"test_acc_mean", "epsilon_mean"}}}.
"""

from __future__ import annotations

import numpy as np

from pytest_fmlbench.evalkit import (
    fail,
    harness_args,
    load_labels,
    load_split_config,
    original_split_indices,
    write_result,
)
from pytest_fmlbench.taskkit.dp import check_budget

DATASET = "cifar10_dp"
NUM_CLASSES = 10
TARGET_EPSILON, TARGET_DELTA, ACCOUNTANT = 8.0, 1e-5, "prv"


def main() -> None:
    args = harness_args()
    for name in ("workspace", "out", "private", "result"):
        if getattr(args, name) is None:
            fail(f"--{name} is required")
    visible = np.load(args.private / "visible_labels.npy", allow_pickle=False)
    try:
        split_config = load_split_config(args.workspace)
    except Exception as exc:  # a broken editable split_config.json is the experiment's failure
        fail(f"split_config.json is invalid: {str(exc).splitlines()[0]}")
    train_pos, val_pos = original_split_indices(len(visible), split_config)
    labels = visible[val_pos] if args.split == "val" else np.load(args.private / "test_labels.npy", allow_pickle=False)
    pred = load_labels(args.out / "predictions.npy", len(labels), NUM_CLASSES)
    accuracy = float(np.mean(pred == labels))

    # train.py's loader drops the last partial batch (as the original's), which sets the Poisson rate
    privacy, summary = check_budget(args.out / "dp_config.json", len(train_pos), TARGET_EPSILON, TARGET_DELTA,
                                    ACCOUNTANT, drop_last=True)
    means = {"test_acc_mean": accuracy}
    if "epsilon_recomputed" in summary:
        means["epsilon_mean"] = summary["epsilon_recomputed"]
    write_result(
        args.result,
        {DATASET: means},
        stderrs={DATASET: {"test_acc_stderr": 0.0, "epsilon_stderr": 0.0}},
        constraints=[privacy],
        info={"split": args.split, "n_eval": len(labels), **summary},
    )


if __name__ == "__main__":
    main()
