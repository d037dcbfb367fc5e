"""Order and distribute benchmark items so that no worker idles while items remain.

Items run longest-expected first, and under xdist the work-stealing scheduler rebalances whenever a
worker runs dry. An item's expected duration comes from earlier runs of the same task (their wall
clock per validation run, scaled to this session's --steps), else from the task's declared
``expected_duration_s`` (one baseline run: a validation plus a test run).
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest


def per_run_seconds(out_dir: Path, task_id: str) -> float | None:
    """Median seconds per experiment run (steps + final validation + test) of earlier finished runs."""
    samples = []
    for record_path in (out_dir / "runs" / task_id).glob("*/record.json"):
        try:
            record = json.loads(record_path.read_text())
        except (OSError, ValueError):
            continue
        if record.get("status") == "finished" and record.get("wall_clock_s"):
            samples.append(record["wall_clock_s"] / (record.get("steps_used", 0) + 2))
    return statistics.median(samples) if samples else None


def expected_seconds(task, steps: int, out_dir: Path) -> float | None:
    per_run = per_run_seconds(out_dir, task.id)
    if per_run is None and task.spec.expected_duration_s:
        per_run = task.spec.expected_duration_s / 2
    return None if per_run is None else per_run * (steps + 2)


def longest_first(items: list[pytest.Item], steps: int, out_dir: Path) -> None:
    """Reorder benchmark items in place, longest expected first; other items keep their order, after them."""
    cache: dict[str, float | None] = {}
    bench, others = [], []
    for item in items:
        task = getattr(item, "task", None)
        if task is None:
            others.append(item)
            continue
        if task.id not in cache:
            cache[task.id] = expected_seconds(task, steps, out_dir)
        bench.append(item)
    if not bench:
        return
    known = [v for v in cache.values() if v is not None]
    fallback = statistics.median(known) if known else 0.0
    bench.sort(key=lambda item: -(cache[item.task.id] if cache[item.task.id] is not None else fallback))
    items[:] = bench + others


def user_chose_dist(config: pytest.Config) -> bool:
    args = config.invocation_params.args
    return any(a == "--dist" or a.startswith("--dist=") or a == "-d" or a == "--loadscope" for a in args)
