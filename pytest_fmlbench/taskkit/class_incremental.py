"""The continual-learning tasks' evaluators (small profile) reading what a class-incremental run left in OUT:
the predictions made after every session, and the runner's record of what the learner held (measured with
``session_audit``, of which the workspace's session_audit.py is a copy). Both are untrusted input: regular
files only, formats that cannot run code, sizes checked before use."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from ..evalkit import ConstraintOutcome, fail

MAX_RECORD_BYTES = 1_000_000


def load_session_predictions(path: Path, n_sessions: int, n_eval: int, n_classes: int) -> np.ndarray:
    """int64 (n_sessions, n_eval): row s holds the labels predicted after session s."""
    if path.is_symlink() or not path.is_file():
        fail(f"no predictions: {path.name} is missing or not a regular file")
    try:
        pred = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        fail(f"cannot read {path.name} as a .npy array: {str(exc).splitlines()[0]}")
    if pred.shape != (n_sessions, n_eval):
        fail(f"{path.name} has shape {pred.shape}, expected ({n_sessions}, {n_eval})")
    if not np.issubdtype(pred.dtype, np.number) or not np.all(np.isfinite(pred)) or np.any(pred != np.round(pred)):
        fail(f"{path.name} must hold integer class labels (dtype {pred.dtype}, no NaN)")
    if pred.min() < 0 or pred.max() >= n_classes:
        fail(f"{path.name} has labels outside 0..{n_classes - 1}")
    return pred.astype(np.int64)


def load_record(path: Path) -> dict | None:
    """The runner's run_info.json, or None when it is missing or unusable."""
    if path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_RECORD_BYTES:
        return None
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def counts(record: dict | None, key: str, n_sessions: int) -> list[int] | None:
    """record[key] as n_sessions non-negative integers, or None."""
    values = (record or {}).get(key)
    if not isinstance(values, list) or len(values) != n_sessions:
        return None
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in values):
        return None
    return values


def seen_classes_only(pred: np.ndarray, seen: list[list[int]]) -> ConstraintOutcome:
    """After session s, a class-incremental learner can only name classes it has been taught."""
    bad = [(s, sorted(set(np.unique(row).tolist()) - set(classes)))
           for s, (row, classes) in enumerate(zip(pred, seen))]
    bad = [(s, extra) for s, extra in bad if extra]
    detail = "; ".join(f"after session {s} it predicted unseen class(es) {extra}" for s, extra in bad)
    return ConstraintOutcome(name="seen_classes_only", ok=not bad, value=float(len(bad)), limit=0.0,
                             detail=detail or "every prediction names a class seen so far")


def parameter_cap(record: dict | None, limit: int) -> ConstraintOutcome:
    n = (record or {}).get("n_parameters")
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        return ConstraintOutcome(name="model_size", ok=False, limit=float(limit),
                                 detail="run_info.json has no parameter count: the run did not finish normally")
    return ConstraintOutcome(name="model_size", ok=n <= limit, value=float(n), limit=float(limit),
                             detail=f"{n} parameters in the learner's torch modules (limit {limit})")


def accuracy_stderr(correct: np.ndarray) -> float:
    p = float(np.mean(correct))
    return math.sqrt(p * (1 - p) / len(correct)) if len(correct) else 0.0
