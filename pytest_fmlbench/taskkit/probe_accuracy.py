"""The full representation-learning tasks' evaluator: top-1 accuracy of a run's linear-probe predictions.

For val, the labels of the val part of the visible pool (recomputed from the workspace's split_config.json, in
the order train.py predicts it); for test, the hidden test's, from PRIVATE only. Writes the original's results
layout, ``{dataset: {"means": {key}}}``, under the same key on both splits, as the originals do.
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


def score(dataset: str, key: str, num_classes: int) -> None:
    """The evaluator's main: ``key`` ends in ``_mean``; its ``_stderr`` twin is 0 (one probe, one number)."""
    args = harness_args()
    for name in ("out", "private", "result") + (("workspace",) if args.split == "val" else ()):
        if getattr(args, name) is None:
            fail(f"--{name} is required")
    labels = true_labels(args)
    predictions = load_labels(args.out / "predictions.npy", len(labels), num_classes)
    accuracy = float(np.mean(predictions == labels))
    write_result(args.result, {dataset: {key: accuracy}},
                 stderrs={dataset: {key.removesuffix("_mean") + "_stderr": 0.0}},
                 info={"split": args.split, "n_eval": len(labels)})
