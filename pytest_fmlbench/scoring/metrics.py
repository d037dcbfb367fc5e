"""FML-bench's scores, computed from run records alone (reference.md, 'Scoring').

Per run: normalized improvement on test, and the process-level metrics. Per task: mean and SEM over
seeds. Summary rows: plain mean over tasks, NaN skipped.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..record import RunRecord, StepRecord

NAN = float("nan")
EXPLORATION = ("spread", "uniqueness", "reach", "effective_dim")
PROCESS_COLUMNS = (
    *EXPLORATION, "val_test_gap", "valid_step_ratio", "auc_steps", "first_improvement_step",
    "late_gain_fraction", "best_improvement_step", "tokens_m", "wall_clock_h", "cost_usd",
)


def scale(record: RunRecord, baseline: float) -> float:
    worst = baseline if record.norm_worst == "baseline" else record.norm_worst
    return abs(record.norm_best - worst)


def signed_gain(record: RunRecord, value: float, baseline: float, d: float) -> float:
    diff = value - baseline if record.direction == "higher" else baseline - value
    return diff / d


def ni(record: RunRecord, value: float | None, baseline: float) -> float:
    """max(0, improvement / D); NaN when there is no value to score."""
    if value is None:
        return NAN
    d = scale(record, baseline)
    return max(0.0, signed_gain(record, value, baseline, d)) if d > 0 else NAN


def ni_test(record: RunRecord) -> float:
    if record.integrity == "violated" or record.test_metric is None:
        return NAN
    if record.constraint_violated:
        return 0.0
    return ni(record, record.test_metric, record.baseline_test)


def ni_val(record: RunRecord) -> float:
    return ni(record, record.best_val, record.baseline_val)


def improvement_curve(record: RunRecord, steps: list[StepRecord]) -> list[float]:
    """G_k for k = 1..K: signed gain of the running best (starting at the baseline val) over baseline."""
    d = scale(record, record.baseline_val)
    best = record.baseline_val
    curve = []
    for step in steps:
        if step.success and step.metric is not None:
            better = step.metric > best if record.direction == "higher" else step.metric < best
            if better:
                best = step.metric
        curve.append(signed_gain(record, best, record.baseline_val, d) if d > 0 else NAN)
    return curve


def process_metrics(record: RunRecord, steps: list[StepRecord]) -> dict[str, float]:
    curve = improvement_curve(record, steps)
    k = len(curve)
    first = next((i + 1 for i, g in enumerate(curve) if g > 0), None)
    g_final = curve[-1] if curve else NAN
    g_half = curve[k // 2 - 1] if k // 2 >= 1 else 0.0
    late = (g_final - g_half) / g_final if curve and g_final > 0 else NAN
    good = [s for s in steps if s.success and s.metric is not None]
    if good:
        best_value = max(s.metric for s in good) if record.direction == "higher" else min(s.metric for s in good)
        best_step = max(s.step for s in good if s.metric == best_value)
    else:
        best_step = None
    test_ni, val_ni = ni_test(record), ni_val(record)
    return {
        **{name: NAN for name in EXPLORATION},  # needs code embeddings; filled by the scoring issue
        "val_test_gap": abs(val_ni - test_ni) if not (math.isnan(val_ni) or math.isnan(test_ni)) else NAN,
        "valid_step_ratio": record.valid_steps / record.steps_used if record.steps_used else NAN,
        "auc_steps": float(np.mean(curve)) if curve else NAN,
        "first_improvement_step": float(first) if first is not None else NAN,
        "late_gain_fraction": late,
        "best_improvement_step": float(best_step) if best_step is not None else NAN,
        "tokens_m": record.usage.total_tokens / 1e6,
        "wall_clock_h": record.wall_clock_s / 3600,
        # beyond the original's twelve: dollars, NaN when any call's price is unknown
        "cost_usd": NAN if record.usage.cost_usd is None else record.usage.cost_usd,
    }


def run_note(record: RunRecord) -> str:
    if record.integrity == "violated":
        return "integrity violated"
    if record.status == "error":
        return "run crashed"
    if record.test_error:
        return "test failed: " + record.test_error.splitlines()[0][:80]
    if record.constraint_violated:
        return "constraint violated on test (NI = 0)"
    if record.test_on_baseline:
        return "no valid step: tested the baseline code"
    if record.status == "stopped":
        return f"stopped: {record.stop_reason}"
    return ""


@dataclass
class Scores:
    """Everything the three tables show, as data frames (one row per run, then per task)."""

    runs: pd.DataFrame

    @classmethod
    def from_runs(cls, runs: list[tuple[RunRecord, list[StepRecord]]]) -> Scores:
        rows = []
        for record, steps in runs:
            rows.append({
                "agent": record.agent, "model": record.model or "-", "task": record.task,
                "seed": record.seed, "direction": record.direction, "metric": record.metric_key,
                "baseline_test": record.baseline_test, "test_metric": record.test_metric,
                "ni": ni_test(record), "note": run_note(record), **process_metrics(record, steps),
            })
        return cls(pd.DataFrame(rows))

    def groups(self) -> list[tuple[tuple[str, str], Scores]]:
        if self.runs.empty:
            return []
        return [(key, Scores(frame.reset_index(drop=True)))
                for key, frame in self.runs.groupby(["agent", "model"], sort=True)]

    def per_task(self) -> pd.DataFrame:
        """Mean and SEM over seeds for each task (SEM is NaN with one seed)."""
        numeric = ["test_metric", "ni", *PROCESS_COLUMNS]
        frame = self.runs.copy()
        frame[numeric] = frame[numeric].astype(float)
        grouped = frame.groupby("task", sort=True)
        out = grouped[["direction", "metric", "baseline_test"]].first()
        out["seeds"] = grouped.size()
        for col in numeric:
            out[col] = grouped[col].mean()
            out[f"{col}_sem"] = grouped[col].sem()
        out["note"] = grouped["note"].agg(lambda notes: "; ".join(sorted({n for n in notes if n})))
        return out

    def summary(self) -> dict[str, float]:
        """Plain mean over tasks (NaN skipped) of NI and every process metric."""
        tasks = self.per_task()
        return {col: float(tasks[col].mean(skipna=True)) for col in ("ni", *PROCESS_COLUMNS)}
