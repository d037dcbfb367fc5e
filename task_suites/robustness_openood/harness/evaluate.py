"""Score one OOD-detection experiment: AUROC of its in-distribution scores (the metric), FPR@95%TPR,
and the classification accuracy on the in-distribution inputs.

Which inputs are in-distribution comes from PRIVATE only: for val, the held-out visible digits
(recomputed from the workspace's split_config.json) followed by the near-OOD letters, in the order
train.py scores them; for test, the marks prepare.py kept when it mixed the hidden inputs.
Malformed scores or predictions -> exit 1 with a one-line message.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
from sklearn.metrics import roc_auc_score, roc_curve

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ood_data import NUM_CLASSES  # noqa: E402

from pytest_fmlbench.evalkit import (  # noqa: E402
    fail,
    harness_args,
    load_labels,
    load_split_config,
    split_indices,
    write_result,
)

DATASET = "openood"
MAX_SCORE_BYTES = 1 << 20


def _private(args, name: str) -> np.ndarray:
    path = args.private / name
    if not path.is_file():
        fail(f"{path} is missing: run prepare.py first")
    return np.load(path, allow_pickle=False)


def truth(args) -> np.ndarray:
    """Class label of every scored input, in the experiment's order; -1 marks an OOD input."""
    if args.split == "test":
        return _private(args, "test_y.npy")
    visible_y = _private(args, "visible_y.npy")
    try:
        config = load_split_config(args.workspace)
    except Exception as exc:  # a broken editable split_config.json is the experiment's failure
        fail(f"split_config.json is invalid: {str(exc).splitlines()[0]}")
    _, val_idx = split_indices(len(visible_y), config)
    n_ood = int(_private(args, "n_val_ood.npy"))
    return np.concatenate([visible_y[val_idx], np.full(n_ood, -1, dtype=np.int64)])


def load_scores(path: Path, n_expected: int) -> np.ndarray:
    if not path.is_file() or path.is_symlink():
        fail(f"no scores: {path} is missing or not a regular file")
    if path.stat().st_size > MAX_SCORE_BYTES:
        fail(f"{path.name} is larger than {MAX_SCORE_BYTES} bytes")
    try:
        scores = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        fail(f"cannot read {path.name} as a .npy array: {str(exc).splitlines()[0]}")
    if scores.shape != (n_expected,) or not np.issubdtype(scores.dtype, np.number):
        fail(f"{path.name} must be a numeric vector of shape ({n_expected},), got {scores.dtype} {scores.shape}")
    scores = scores.astype(np.float64)
    if not np.all(np.isfinite(scores)):
        fail(f"{path.name} holds NaN or infinite scores")
    return scores


def fpr_at_95_tpr(is_id: np.ndarray, scores: np.ndarray) -> float:
    """Fraction of OOD inputs accepted at the first threshold that keeps 95% of the ID inputs."""
    fpr, tpr, _ = roc_curve(is_id, scores)
    return float(fpr[np.searchsorted(tpr, 0.95, side="left")])


def auroc_stderr(auroc: float, n_pos: int, n_neg: int) -> float:
    """Hanley & McNeil (1982) standard error of an AUROC."""
    q1, q2 = auroc / (2 - auroc), 2 * auroc**2 / (1 + auroc)
    var = (auroc * (1 - auroc) + (n_pos - 1) * (q1 - auroc**2) + (n_neg - 1) * (q2 - auroc**2)) / (n_pos * n_neg)
    return math.sqrt(max(var, 0.0))


def main() -> None:
    args = harness_args()
    for name in ("out", "private", "result") + (("workspace",) if args.split == "val" else ()):
        if getattr(args, name) is None:
            fail(f"--{name} is required")
    labels = truth(args)
    is_id = (labels >= 0).astype(int)
    scores = load_scores(args.out / "scores.npy", len(labels))
    predictions = load_labels(args.out / "predictions.npy", len(labels), NUM_CLASSES)

    auroc = float(roc_auc_score(is_id, scores))
    fpr95 = fpr_at_95_tpr(is_id, scores)
    n_id, n_ood = int(is_id.sum()), int(len(is_id) - is_id.sum())
    id_acc = float(np.mean(predictions[is_id == 1] == labels[is_id == 1]))
    write_result(
        args.result,
        {DATASET: {"auroc": auroc, "fpr95": fpr95, "id_acc": id_acc}},
        stderrs={DATASET: {"auroc": auroc_stderr(auroc, n_id, n_ood),
                           "fpr95": math.sqrt(fpr95 * (1 - fpr95) / n_ood),
                           "id_acc": math.sqrt(id_acc * (1 - id_acc) / n_id)}},
        info={"split": args.split, "n_id": n_id, "n_ood": n_ood,
              "ood_source": "near-OOD letters" if args.split == "val" else "hidden far-OOD source"},
    )


if __name__ == "__main__":
    main()
