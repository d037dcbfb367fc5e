"""The tables as CSV files, with the original's column names so they line up with its
compute_agent_metrics.py: per run group (one identity but the seed, :mod:`..scoring.groups`) a folder, and
the groups side by side, each column named by the group's label. A smoke group's NI cells are empty and its
note says it is a check of the code path, not a result.

Agents name themselves and their options, and their words reach the notes: every text cell, row label and
column name passes :func:`..safe_text.csv_cell` (no cell a spreadsheet would run as a formula), and the
per-agent folder's name :func:`..safe_text.file_name`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from ..safe_text import csv_cell, file_name
from ..scoring.aggregate import AUTO, Scores
from ..scoring.aup import BASELINE, aup_table
from ..scoring.metrics import PROCESS_COLUMNS
from . import causes
from .runs import as_scores

# the original's CSV column names, so our CSVs line up with compute_agent_metrics.py's
ORIGINAL_NAMES = {
    "spread": "Exploration Spread", "uniqueness": "Exploration Uniqueness", "reach": "Exploration Reach",
    "effective_dim": "Effective dim", "val_test_gap": "Val-test |gap|", "valid_step_ratio": "Valid step ratio",
    "llm_failed_calls": "Failed LLM calls", "llm_truncated_calls": "Cut-off LLM replies",
    "step_completion_rate": "Step completion rate",
    "auc_steps": "AUC-over-steps", "first_improvement_step": "First-improvement step",
    "late_gain_fraction": "Late-gain fraction", "best_improvement_step": "Best-improvement step",
    "tokens_m": "Token cost (M)", "wall_clock_h": "Wall-clock time (h)", "cost_usd": "Cost (USD)",
    "ni": "Normalized Improvement", "raw_test": "raw_test",
}


def _with_mean(frame: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    mean = {col: frame[col].mean(skipna=True) if pd.api.types.is_numeric_dtype(frame[col]) else "" for col in columns}
    return pd.concat([frame[columns], pd.DataFrame([mean], index=pd.Index(["MEAN"], name=frame.index.name))])


def formula_safe(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with every text (cells, row labels, column names) made a safe CSV cell; numbers unchanged."""
    safe = frame.rename(index=csv_cell, columns=csv_cell)
    for column in range(safe.shape[1]):
        values = safe.iloc[:, column]
        if values.dtype == object or pd.api.types.is_string_dtype(values.dtype):
            safe.isetitem(column, values.map(csv_cell))
    return safe


def write_csvs(runs: Scores | list, out_dir: Path, encoder: Any = AUTO) -> list[Path]:
    """Per run group a folder: raw_performance.csv, normalized_improvement.csv, process_metrics.csv (one row
    per task and a MEAN row, the original's column names) and runs.csv (one row per seed, with the group's
    identity: options, steps budget, scale, ...); beside them
    the side-by-side comparison, aup.csv and every run in runs.csv. Every file names the encoder.

    Runs the infrastructure failed are left out of every table (runs.csv keeps them, with their
    ``failure_cause``), and failures_by_cause.csv counts each group's failed runs per cause."""
    every_run = causes.with_causes(as_scores(runs, encoder))
    scores = causes.agents_own(every_run)
    out_dir = Path(out_dir)
    written = []

    def save(frame: pd.DataFrame, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        formula_safe(frame).to_csv(path)
        written.append(path)

    folders: set[str] = set()
    for run_group, group in scores.groups():
        # <agent>__<model>, and what sets the group apart where its agent/model pair has several
        apart = run_group.label.removeprefix(run_group.solver).replace(" / ", "__").replace(" ", "_")
        name = f"{run_group.agent}__{run_group.model}{apart}".replace("/", "-").replace("=", ":")
        # two labels that read alike once made a file name keep a folder each: the second is named by a hash
        folder_name = file_name(name) if file_name(name) not in folders else file_name(name + "\0")
        folders.add(folder_name)
        folder = out_dir / folder_name
        tasks = group.per_task()
        raw = _with_mean(tasks, ["metric", "direction", "transform", "baseline_test", "raw_test", "raw_test_sem",
                                 "seeds", "note", "encoder"])
        raw.loc["MEAN", "note"] = "mixed units across tasks - not comparable; use Normalized Improvement"
        save(raw, folder / "raw_performance.csv")
        save(_with_mean(tasks, ["ni", "ni_sem", "ni_val", "seeds", "note", "encoder"])
             .rename(columns={"ni": ORIGINAL_NAMES["ni"], "ni_sem": "NI SEM", "ni_val": "NI (best val)"}),
             folder / "normalized_improvement.csv")
        sems = [f"{c}_sem" for c in PROCESS_COLUMNS]
        process = _with_mean(tasks, [*PROCESS_COLUMNS, *sems, "seeds", "encoder"])
        process.loc["MEAN", "encoder"] = scores.encoder
        save(process.rename(columns={**ORIGINAL_NAMES, **{f"{c}_sem": f"{ORIGINAL_NAMES[c]} SEM" for c in PROCESS_COLUMNS}}),
             folder / "process_metrics.csv")
        save(group.runs.set_index(["task", "seed"]), folder / "runs.csv")

    if not scores.runs.empty:
        frame = scores.runs.assign(solver=scores.runs["group"])
        per_task = frame.groupby(["task", "solver"])[["ni", *PROCESS_COLUMNS]].mean()
        ni = per_task["ni"].unstack("solver")
        save(pd.concat([ni, ni.mean(skipna=True).to_frame("MEAN").T]), out_dir / "comparison_normalized_improvement.csv")
        gap = per_task["val_test_gap"].unstack("solver")
        save(pd.concat([gap, gap.mean(skipna=True).to_frame("MEAN").T]), out_dir / "comparison_val_test_gap.csv")
        summary = pd.DataFrame({run_group.label: group.summary() for run_group, group in scores.groups()})
        summary = summary.loc[["ni", *PROCESS_COLUMNS]].rename(index=ORIGINAL_NAMES).astype(object)
        summary.loc["encoder"] = scores.encoder
        save(summary, out_dir / "comparison_process_metrics.csv")
        aup = aup_table(scores)
        aup.loc[BASELINE, "note"] = "the baseline code as a solver"
        save(aup, out_dir / "aup.csv")
    if not every_run.runs.empty:
        failures = causes.counts_frame(every_run.groups())
        failures.index.name = "failure_cause"
        save(failures, out_dir / "failures_by_cause.csv")
        save(every_run.runs.set_index(["agent", "model", "task", "seed"]), out_dir / "runs.csv")
    return written
