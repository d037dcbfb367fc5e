"""The three tables (terminal, via rich) and their CSV twins, from run records."""

from __future__ import annotations

import io
import math
from pathlib import Path

from rich.console import Console
from rich.table import Table

from .record import RunRecord, RunStore, StepRecord
from .scoring import EXPLORATION, PROCESS_COLUMNS, Scores

_PROCESS_HEADERS = {
    "spread": "Spread", "uniqueness": "Uniq.", "reach": "Reach", "effective_dim": "Eff.dim",
    "val_test_gap": "Val-test gap", "valid_step_ratio": "Valid ratio", "auc_steps": "AUC",
    "first_improvement_step": "1st impr.", "late_gain_fraction": "Late gain", "best_improvement_step": "Best step",
    "tokens_m": "Tokens (M)", "wall_clock_h": "Hours", "cost_usd": "Cost ($)",
}


def load_runs(run_dirs: list[Path]) -> list[tuple[RunRecord, list[StepRecord]]]:
    runs = []
    for run_dir in run_dirs:
        store = RunStore(Path(run_dir))
        if store.exists():
            runs.append((store.load(), store.load_steps()))
    return runs


def find_run_dirs(root: Path) -> list[Path]:
    return sorted(p.parent for p in Path(root).rglob("record.json"))


def _fmt(value: float, sem: float = math.nan, digits: int = 4) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    text = f"{value:.{digits}g}"
    if not math.isnan(sem):
        text += f" ± {sem:.2g}"
    return text


def build_tables(scores: Scores, title: str) -> list[Table]:
    tasks = scores.per_task()
    summary = scores.summary()

    raw = Table(title=f"Raw Performance — {title}", title_justify="left")
    for col in ("Task", "Metric", "Dir", "Baseline test", "Agent test", "Seeds", "Note"):
        raw.add_column(col, overflow="fold")
    for task, row in tasks.iterrows():
        raw.add_row(task, row["metric"], "↑" if row["direction"] == "higher" else "↓",
                    _fmt(row["baseline_test"]), _fmt(row["test_metric"], row["test_metric_sem"]),
                    str(row["seeds"]), row["note"])

    norm = Table(title=f"Normalized Improvement — {title}", title_justify="left")
    for col in ("Task", "NI (test)", "Note"):
        norm.add_column(col, overflow="fold")
    for task, row in tasks.iterrows():
        norm.add_row(task, _fmt(row["ni"], row["ni_sem"]), row["note"])
    norm.add_section()
    norm.add_row("Mean", _fmt(summary["ni"]), "plain mean over tasks, NaN skipped")

    proc = Table(title=f"Process-Level metrics — {title}", title_justify="left",
                 caption="Exploration metrics (Spread, Uniq., Reach, Eff.dim) are pending: code embeddings "
                 "are not computed yet.")
    proc.add_column("Task", no_wrap=True)
    for col in PROCESS_COLUMNS:
        proc.add_column(_PROCESS_HEADERS[col], justify="right", no_wrap=True)
    for task, row in tasks.iterrows():
        proc.add_row(task, *[_process_cell(col, row[col]) for col in PROCESS_COLUMNS])
    proc.add_section()
    proc.add_row("Mean", *[_process_cell(col, summary[col]) for col in PROCESS_COLUMNS])
    return [raw, norm, proc]


def _process_cell(col: str, value: float) -> str:
    if col in EXPLORATION:
        return "pending"
    if col == "cost_usd" and math.isnan(value):
        return "unknown"
    return _fmt(value, digits=3)


def render(runs: list[tuple[RunRecord, list[StepRecord]]], width: int = 160) -> str:
    scores = Scores.from_runs(runs)
    buffer = io.StringIO()
    console = Console(file=buffer, width=width, force_terminal=False, color_system=None)
    for (agent, model), group in scores.groups():
        for table in build_tables(group, f"{agent} / {model}"):
            console.print(table)
    return buffer.getvalue()


def write_csvs(runs: list[tuple[RunRecord, list[StepRecord]]], out_dir: Path) -> list[Path]:
    """raw_performance.csv, normalized_improvement.csv, process_metrics.csv per (agent, model)."""
    written = []
    for (agent, model), group in Scores.from_runs(runs).groups():
        folder = Path(out_dir) / f"{agent}__{model}".replace("/", "-")
        folder.mkdir(parents=True, exist_ok=True)
        tasks = group.per_task()
        files = {
            "raw_performance.csv": tasks[["metric", "direction", "baseline_test", "test_metric", "test_metric_sem",
                                          "seeds", "note"]],
            "normalized_improvement.csv": tasks[["ni", "ni_sem", "note"]],
            "process_metrics.csv": tasks[list(PROCESS_COLUMNS)],
            "runs.csv": group.runs,
        }
        for name, frame in files.items():
            frame.to_csv(folder / name)
            written.append(folder / name)
    return written
