"""The numbers a bundle's tables hold, re-scored from run records, and how two sets of them are compared: to
1e-9, field by field, naming the first that differs."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ..record import RunRecord, StepRecord
from ..scoring.metrics import EXPLORATION
from . import BundleError

TOLERANCE = 1e-9


def close(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return math.isclose(a, b, rel_tol=TOLERANCE, abs_tol=TOLERANCE)
    return a == b


def first_difference(bundled: Any, rescored: Any, where: str = "", skip: frozenset[str] = frozenset(),
                     shared_only: bool = False) -> tuple[str, Any, Any] | None:
    """The first field (a dotted path) where two JSON values differ, numbers compared to 1e-9; ``shared_only``:
    fields only one side has are passed over (a summary another version of the package wrote)."""
    if isinstance(bundled, dict) and isinstance(rescored, dict):
        keys = set(bundled) & set(rescored) if shared_only else set(bundled) | set(rescored)
        for key in sorted(keys, key=str):
            if key in skip:
                continue
            field = f"{where}.{key}" if where else str(key)
            if key not in bundled or key not in rescored:
                return field, bundled.get(key, "(absent)"), rescored.get(key, "(absent)")
            found = first_difference(bundled[key], rescored[key], field, skip, shared_only)
            if found:
                return found
        return None
    if isinstance(bundled, list) and isinstance(rescored, list):
        if len(bundled) != len(rescored):
            return f"{where} (length)", len(bundled), len(rescored)
        for index, (a, b) in enumerate(zip(bundled, rescored)):
            found = first_difference(a, b, f"{where}[{index}]", skip, shared_only)
            if found:
                return found
        return None
    return None if close(bundled, rescored) else (where, bundled, rescored)


def rescored_tables(run_dirs: list[Path]) -> dict[str, Any]:
    """The session summary's tables from the records alone (exploration metrics off: they need an encoder's
    weights, which a verifying machine may lack)."""
    from ..reports.runs import load_runs
    from ..reports.summary import build_summary
    from ..scoring.aggregate import Scores

    problems: list[str] = []
    runs = load_runs(run_dirs, left_out=lambda item, why: problems.append(why))
    if problems:
        raise BundleError(problems[0])
    scores = Scores.from_runs(runs, encoder=None, left_out=lambda item, why: problems.append(why))
    if problems:
        raise BundleError(problems[0])
    summary = build_summary(scores, source="fmlbench score").model_dump(mode="json")
    return {key: summary[key] for key in ("encoder", "tables", "aup", "runs")}


def score_difference(saved: dict[str, Any], record: RunRecord, steps: list[StepRecord]) -> \
        tuple[str, Any, Any] | None:
    """The first score a saved session kept for a run that its record no longer gives (exploration metrics
    aside: they need an encoder)."""
    from ..scoring import from_record, score_run

    row = score_run(from_record(record, steps))
    for key in sorted(set(saved) & set(row)):
        if key in EXPLORATION:
            continue
        value = None if isinstance(row[key], float) and math.isnan(row[key]) else row[key]
        if not close(saved[key], value):
            return key, saved[key], value
    return None
