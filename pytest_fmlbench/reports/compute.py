"""Compute beside the score: the GPU and CPU time each run used, and NI per GPU-hour of a run group.

A run holds the GPUs its record names (``devices``: the slice its worker or Slurm job was given) while its
experiments run; its GPU-seconds are those GPUs times the time of its recorded steps (the baseline run
included) and of its final test (the validation re-run and the test run). Its CPU-seconds are what the
kernel counted for the same commands (``cpu_s`` of each step, ``final_test_cpu_s``), where it counted them.
The agent's own thinking between steps is not counted. Runs read from elsewhere (the original's results)
have no record and count nothing.
"""

from __future__ import annotations

import math
from pathlib import Path

from ..record import RecordUnreadable, RunStore
from ..safe_text import printable
from ..scoring.aggregate import Scores

COLUMN = "gpu_hours"
CPU_COLUMN = "cpu_hours"
RULE = "GPU-hours: the GPUs each run held times the time of its recorded steps and final test"


def _hours_at(source: str) -> tuple[float, float]:
    """The GPU-hours and CPU-hours a run folder's record and steps account for; NaN where unknown."""
    store = RunStore(Path(source)) if source else None
    if store is None or not store.exists():
        return math.nan, math.nan
    try:
        record, steps = store.load(), store.load_steps()
    except (RecordUnreadable, OSError):
        return math.nan, math.nan
    timed = [*steps, *([record.baseline_run] if record.baseline_run is not None else [])]
    seconds = sum(step.duration_s for step in timed) + (record.final_test_s or 0.0)
    counted = [step.cpu_s for step in timed if step.cpu_s is not None]
    if record.final_test_cpu_s is not None:
        counted.append(record.final_test_cpu_s)
    return len(record.devices) * seconds / 3600.0, sum(counted) / 3600.0 if counted else math.nan


def with_gpu_hours(scores: Scores) -> Scores:
    """``scores`` itself, given a ``gpu_hours`` column where it has none (read once per session)."""
    if not scores.runs.empty and COLUMN not in scores.runs:
        hours = [_hours_at(str(source)) for source in scores.runs["source"]]
        scores.runs[COLUMN] = [gpu for gpu, _ in hours]
        scores.runs[CPU_COLUMN] = [cpu for _, cpu in hours]
    return scores


def group_compute(scores: Scores) -> dict[str, float | None]:
    """One run group's GPU-hours (summed over its runs) and NI per GPU-hour (its mean NI over tasks divided by
    the mean GPU-hours of a run); None where no run held a GPU, or the NI is unknown."""
    runs = with_gpu_hours(scores).runs if not scores.runs.empty else None
    cpu = runs[CPU_COLUMN] if runs is not None and CPU_COLUMN in runs else None
    cpu_hours = float(cpu.sum(skipna=True)) if cpu is not None and cpu.notna().any() else None
    hours = runs[COLUMN] if runs is not None else None
    if hours is None or not (hours > 0).any():
        return {"gpu_hours": None, "ni_per_gpu_hour": None, "cpu_hours": cpu_hours}
    ni = scores.summary()["ni"]
    per_run = float(hours.mean(skipna=True))
    return {"gpu_hours": float(hours.sum(skipna=True)),
            "ni_per_gpu_hour": None if math.isnan(ni) or per_run <= 0 else ni / per_run, "cpu_hours": cpu_hours}


def compute_line(label: str, values: dict[str, float | None]) -> str | None:
    """One line for a group's tables; None where it held no GPU."""
    if values["gpu_hours"] is None:
        return None
    per_hour = values["ni_per_gpu_hour"]
    cpu = values.get("cpu_hours")
    return (f"Compute — {printable(label)}: {values['gpu_hours']:.3g} GPU-hours, NI per GPU-hour "
            f"{'n/a' if per_hour is None else f'{per_hour:.3g}'}"
            f"{'' if cpu is None else f', {cpu:.3g} CPU-hours'} ({RULE})")
