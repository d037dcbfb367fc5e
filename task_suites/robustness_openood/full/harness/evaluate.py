"""Score one OOD-detection run: AUROC (the metric) and FPR at 95% TPR of its in-distribution scores.

Which scored input is in-distribution comes from PRIVATE only: for val, the val part of the visible pool
(recomputed from the workspace's split_config.json) followed by the CIFAR-100 images, in the order train.py
scores them; for test, the marks prepare.py kept when it mixed the hidden CIFAR-10 and SVHN images.
Writes the original's results layout: {"openood": {"means": {"auroc_mean", "fpr95_mean"}}}. Malformed
scores -> exit 1 with a one-line message.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
from sklearn.metrics import roc_auc_score

from pytest_fmlbench.evalkit import (
    OriginalSplitConfig,
    fail,
    harness_args,
    load_split_config,
    original_split_indices,
    read_untrusted,
    write_result,
)

DATASET = "openood"
OOD_NAME = {"val": "CIFAR-100", "test": "SVHN"}


def _private(args, name: str) -> np.ndarray:
    path = args.private / name
    if not path.is_file():
        fail(f"{path} is missing: run prepare.py first")
    return np.load(path, allow_pickle=False)


def is_in_distribution(args) -> np.ndarray:
    """1 for an in-distribution input, 0 for an OOD one, in the experiment's scoring order."""
    if args.split == "test":
        return _private(args, "test_is_id.npy").astype(np.int64)
    n_visible, n_ood = (int(v) for v in _private(args, "val_counts.npy"))
    try:
        config = load_split_config(args.workspace, OriginalSplitConfig)
    except Exception as exc:  # a broken editable split_config.json is the experiment's failure
        fail(f"split_config.json is invalid: {str(exc).splitlines()[0]}")
    _, val_pos = original_split_indices(n_visible, config)
    if len(val_pos) == 0:
        fail(f"split_config.json leaves no val image (val_ratio {config.val_ratio} of {n_visible})")
    return np.concatenate([np.ones(len(val_pos), dtype=np.int64), np.zeros(n_ood, dtype=np.int64)])


def load_scores(path: Path, n_expected: int) -> np.ndarray:
    if not path.is_file():
        fail(f"no scores: {path} is missing")
    try:
        scores = np.load(io.BytesIO(read_untrusted(path)), allow_pickle=False)
    except (OSError, ValueError) as exc:
        fail(f"cannot read {path.name} as a .npy array: {str(exc).splitlines()[0]}")
    if scores.shape != (n_expected,) or not (np.issubdtype(scores.dtype, np.floating)
                                             or np.issubdtype(scores.dtype, np.integer)):
        fail(f"{path.name} must be a numeric vector of shape ({n_expected},), got {scores.dtype} {scores.shape}")
    scores = scores.astype(np.float64)
    if not np.all(np.isfinite(scores)):
        fail(f"{path.name} holds NaN or infinite scores")
    return scores


def fpr_at_95_tpr(is_id: np.ndarray, scores: np.ndarray) -> float:
    """The original's FPR95: going down the scores, the fraction of OOD inputs passed by the time
    int(0.95 * n_ID) in-distribution inputs are; inputs of equal score pass together (the original's
    unstable sort leaves their order to chance)."""
    order = np.argsort(-scores, kind="stable")
    sorted_scores, sorted_id = scores[order], is_id[order]
    last_of_tie = np.r_[sorted_scores[1:] != sorted_scores[:-1], True]
    tp, fp = np.cumsum(sorted_id)[last_of_tie], np.cumsum(1 - sorted_id)[last_of_tie]
    n_pos, n_neg = int(is_id.sum()), int(len(is_id) - is_id.sum())
    reached = np.flatnonzero(tp >= int(0.95 * n_pos))
    return float(fp[reached[0]] / n_neg) if n_neg else 0.0


def main() -> None:
    args = harness_args()
    for name in ("out", "private", "result") + (("workspace",) if args.split == "val" else ()):
        if getattr(args, name) is None:
            fail(f"--{name} is required")
    is_id = is_in_distribution(args)
    scores = load_scores(args.out / "scores.npy", len(is_id))
    auroc = float(roc_auc_score(is_id, scores))
    fpr95 = fpr_at_95_tpr(is_id, scores)
    write_result(
        args.result,
        {DATASET: {"auroc_mean": auroc, "fpr95_mean": fpr95}},
        stderrs={DATASET: {"auroc_stderr": 0.0, "fpr95_stderr": 0.0}},
        info={"split": args.split, "ood_dataset": OOD_NAME[args.split], "n_id": int(is_id.sum()),
              "n_ood": int(len(is_id) - is_id.sum())},
    )


if __name__ == "__main__":
    main()
