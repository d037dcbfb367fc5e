"""Compute beside the score: the GPU time each run held, and NI per GPU-hour of a run group.

A run holds the GPUs its record names (``devices``: the slice its worker or Slurm job was given) while its
experiments run; its GPU-seconds are those GPUs times the time of its recorded steps (the baseline run
included). The agent's own thinking between steps, and the final test, are not counted: their time is not
recorded per run. Runs read from elsewhere (the original's results) have no record and count nothing.
"""

from __future__ import annotations

import math
from pathlib import Path

from ..record import RecordUnreadable, RunStore
from ..safe_text import printable
from ..scoring.aggregate import Scores

COLUMN = "gpu_hours"
RULE = "GPU-hours: the GPUs each run held times the time of its recorded steps"


def _gpu_hours_at(source: str) -> float:
    """The GPU-hours a run folder's record and steps account for; NaN without a readable record."""
    store = RunStore(Path(source)) if source else None
    if store is None or not store.exists():
        return math.nan
    try:
        record, steps = store.load(), store.load_steps()
    except (RecordUnreadable, OSError):
        return math.nan
    timed = sum(step.duration_s for step in steps)
    if record.baseline_run is not None:
        timed += record.baseline_run.duration_s
    return len(record.devices) * timed / 3600.0


def with_gpu_hours(scores: Scores) -> Scores:
    """``scores`` itself, given a ``gpu_hours`` column where it has none (read once per session)."""
    if not scores.runs.empty and COLUMN not in scores.runs:
        scores.runs[COLUMN] = [_gpu_hours_at(str(source)) for source in scores.runs["source"]]
    return scores


def group_compute(scores: Scores) -> dict[str, float | None]:
    """One run group's GPU-hours (summed over its runs) and NI per GPU-hour (its mean NI over tasks divided by
    the mean GPU-hours of a run); None where no run held a GPU, or the NI is unknown."""
    hours = with_gpu_hours(scores).runs[COLUMN] if not scores.runs.empty else None
    if hours is None or not (hours > 0).any():
        return {"gpu_hours": None, "ni_per_gpu_hour": None}
    ni = scores.summary()["ni"]
    per_run = float(hours.mean(skipna=True))
    return {"gpu_hours": float(hours.sum(skipna=True)),
            "ni_per_gpu_hour": None if math.isnan(ni) or per_run <= 0 else ni / per_run}


def compute_line(label: str, values: dict[str, float | None]) -> str | None:
    """One line for a group's tables; None where it held no GPU."""
    if values["gpu_hours"] is None:
        return None
    per_hour = values["ni_per_gpu_hour"]
    return (f"Compute — {printable(label)}: {values['gpu_hours']:.3g} GPU-hours, NI per GPU-hour "
            f"{'n/a' if per_hour is None else f'{per_hour:.3g}'} ({RULE})")
