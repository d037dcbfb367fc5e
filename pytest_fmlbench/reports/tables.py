"""The terminal's tables (rich), from run records or original results folders.

One run group (one identity but the seed, :mod:`..scoring.groups`): the original's three tables, one row
per task, titled with the group's agent, model, steps and options, plus AUP against the baseline. Several
(agents, or one agent's options or step budgets): the groups and what sets them apart, then one table per
metric group with the run groups as columns (the paper's layout), then AUP and the notes. Only seeds are
averaged; a smoke group's NI and AUP are "-" (no declared baseline applies to it). Every exploration table names the encoder the metrics came from. The CSV twins are
written by :mod:`.csv_files`, the HTML page reads these tables back through :mod:`.plain`.
"""

from __future__ import annotations

import io
import math
from typing import Any

import pandas as pd
from rich.console import Console

from ..scoring.aggregate import AUTO, Scores
from ..scoring.aup import aup_table
from ..scoring.groups import SMOKE_NOTE, RunGroup
from ..scoring.original import paper_baseline_test
from ..scoring.metrics import EXPLORATION, PROCESS_COLUMNS
from ..safe_text import printable
from . import causes, compute
from .runs import as_scores
from .text import LiteralTable, print_whole, wrapped

HEADERS = {
    "spread": "Spread", "uniqueness": "Uniq.", "reach": "Reach", "effective_dim": "Eff.dim",
    "val_test_gap": "Val-test gap", "valid_step_ratio": "Valid ratio", "llm_failed_calls": "Failed calls",
    "llm_truncated_calls": "Cut-off replies",
    "step_completion_rate": "Steps done", "auc_steps": "AUC",
    "first_improvement_step": "1st impr.", "late_gain_fraction": "Late gain", "best_improvement_step": "Best step",
    "tokens_m": "Tok. (M)", "wall_clock_h": "Hours", "cost_usd": "Cost $",
}
GROUPS = {
    "Exploration": EXPLORATION,
    "Generalization": ("val_test_gap",),
    "Reliability": ("valid_step_ratio",),
    "LLM failures": ("llm_failed_calls", "llm_truncated_calls"),
    "Efficiency": ("step_completion_rate", "auc_steps", "first_improvement_step", "late_gain_fraction",
                   "best_improvement_step"),
    "Cost": ("tokens_m", "wall_clock_h", "cost_usd"),
}


# -- cells ---------------------------------------------------------------------------------------

def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def fmt(value: float, sem: float = math.nan, digits: int = 4) -> str:
    if _missing(value):
        return "n/a"
    text = f"{value:.{digits}g}"
    if not _missing(sem):
        text += f" ± {sem:.2g}"
    return text


def process_cell(col: str, value: float, sem: float = math.nan) -> str:
    if col == "cost_usd" and _missing(value):
        return "unknown"
    return fmt(value, sem, digits=3)


def ni_cell(value: float, sem: float, smoke: bool) -> str:
    """A smoke run has no NI: "-", as its note says, rather than "n/a" (which reads as a failed run)."""
    return "-" if smoke else fmt(value, sem)


def _paper_values(tasks) -> dict[str, float]:
    """The original's published baseline test value per full-profile task, shown beside ours (which is
    measured here, the paper's copied, or unmeasured: the note says); empty where no task has one."""
    return {task: value for task in tasks if (value := paper_baseline_test(str(task))) is not None}


def _arrow(direction: str) -> str:
    return "↑" if direction == "higher" else "↓"


def _console(width: int) -> tuple[Console, io.StringIO]:
    buffer = io.StringIO()
    return Console(file=buffer, width=width, force_terminal=False, color_system=None), buffer


# -- one agent -----------------------------------------------------------------------------------

def agent_tables(scores: Scores, title: str, smoke: bool = False) -> list:
    tasks = scores.per_task()
    summary = scores.summary()

    raw = LiteralTable(title=f"Raw Performance — {title}", title_justify="left")
    # a number is never split: its columns do not wrap (print_whole widens a table that does not fit)
    raw.add_column("Task", no_wrap=True)
    raw.add_column("Metric", overflow="fold")
    raw.add_column("Dir")
    paper = _paper_values(tasks.index)
    for col in ("Baseline test", *(["Paper baseline"] if paper else []), "Agent test", "Seeds"):
        raw.add_column(col, justify="right", no_wrap=True)
    raw.add_column("Note", overflow="fold")
    for task, row in tasks.iterrows():
        metric = row["metric"] + (" (-log10)" if row["transform"] == "neg_log10" else "")
        raw.add_row(task, metric, _arrow(row["direction"]), fmt(row["baseline_test"]),
                    *([fmt(paper.get(task))] if paper else []),
                    fmt(row["raw_test"], row["raw_test_sem"]), str(row["seeds"]),
                    wrapped(row["note"]))

    norm = LiteralTable(title=f"Normalized Improvement — {title}", title_justify="left")
    for col in ("Task", "NI (test)", "NI (best val)"):
        norm.add_column(col, justify="left" if col == "Task" else "right", no_wrap=True)
    norm.add_column("Note", overflow="fold")
    for task, row in tasks.iterrows():
        norm.add_row(task, ni_cell(row["ni"], row["ni_sem"], smoke), ni_cell(row["ni_val"], row["ni_val_sem"], smoke),
                     wrapped(row["note"]))
    norm.add_section()
    norm.add_row("Mean", ni_cell(summary["ni"], math.nan, smoke), ni_cell(summary["ni_val"], math.nan, smoke),
                 SMOKE_NOTE if smoke else "plain mean over tasks, NaN skipped")

    proc = LiteralTable(title=f"Process-Level metrics — {title}", title_justify="left")
    proc.add_column("Task", no_wrap=True)
    for col in PROCESS_COLUMNS:
        proc.add_column(HEADERS[col], justify="right", no_wrap=True)
    for task, row in tasks.iterrows():
        proc.add_row(task, *[process_cell(col, row[col]) for col in PROCESS_COLUMNS])
    proc.add_section()
    proc.add_row("Mean", *[process_cell(col, summary[col]) for col in PROCESS_COLUMNS])
    return [raw, norm, proc, f"Exploration metrics (Spread, Uniq., Reach, Eff.dim): encoder: {scores.encoder}"]


# -- several agents side by side -----------------------------------------------------------------

def groups_table(groups: list[RunGroup], scores: Scores) -> LiteralTable:
    """What each column is: the group's whole identity, and how many runs (seeds) it averages."""
    table = LiteralTable(title="Run groups (one column each; only seeds are averaged)", title_justify="left")
    table.add_column("Column", overflow="fold")
    table.add_column("Agent / model / provider / steps / options / marks", overflow="fold")
    table.add_column("Runs", justify="right", no_wrap=True)
    counts = scores.runs["group"].value_counts()
    for group in groups:
        table.add_row(group.label, group.title, str(int(counts.get(group.label, 0))))
    return table


def side_by_side(scores: Scores) -> list:
    pairs = scores.groups()
    groups = [(group.label, part) for group, part in pairs]
    smoke = {group.label for group, _ in pairs if group.smoke}
    per_task = {name: group.per_task() for name, group in groups}
    summaries = {name: group.summary() for name, group in groups}
    tasks = sorted(scores.runs["task"].unique())
    first = scores.runs.groupby("task").first()

    raw = LiteralTable(title="Raw Performance (test; mean ± SEM over seeds)", title_justify="left")
    raw.add_column("Task", no_wrap=True)
    raw.add_column("Dir")
    raw.add_column("Baseline", justify="right")
    paper = _paper_values(tasks)
    if paper:
        raw.add_column("Paper baseline", justify="right")
    for name, _ in groups:
        raw.add_column(name, justify="right", no_wrap=True)
    for task in tasks:
        cells = [_cell(per_task[name], task, "raw_test") for name, _ in groups]
        raw.add_row(task, _arrow(first.loc[task, "direction"]), fmt(first.loc[task, "baseline_test"]),
                    *([fmt(paper.get(task))] if paper else []), *cells)

    norm = LiteralTable(title="Normalized Improvement (test)", title_justify="left")
    norm.add_column("Task", no_wrap=True)
    for name, _ in groups:
        norm.add_column(name, justify="right", no_wrap=True)
    for task in tasks:
        norm.add_row(task, *[_cell(per_task[name], task, "ni", smoke=name in smoke) for name, _ in groups])
    norm.add_section()
    norm.add_row("Mean", *[ni_cell(summaries[name]["ni"], math.nan, name in smoke) for name, _ in groups])
    tables = [groups_table([group for group, _ in pairs], scores), raw, norm]
    if smoke:
        tables.append(f"{', '.join(sorted(smoke))}: {SMOKE_NOTE} (no NI, no AUP)")

    for group, columns in GROUPS.items():
        table = LiteralTable(title=group, title_justify="left")
        if len(columns) == 1:
            # a one-metric group is shown per task, as the val-test gap per task is read
            col = columns[0]
            table.title = f"{group}: {HEADERS[col]}"
            table.add_column("Task", no_wrap=True)
            for name, _ in groups:
                table.add_column(name, justify="right", no_wrap=True)
            for task in tasks:
                table.add_row(task, *[_cell(per_task[name], task, col, process=True) for name, _ in groups])
            table.add_section()
            table.add_row("Mean", *[process_cell(col, summaries[name][col]) for name, _ in groups])
        else:
            table.add_column("Metric (mean over tasks)", no_wrap=True)
            for name, _ in groups:
                table.add_column(name, justify="right", no_wrap=True)
            for col in columns:
                table.add_row(HEADERS[col], *[process_cell(col, summaries[name][col]) for name, _ in groups])
        tables.append(table)
        if group == "Exploration":
            tables.append(f"Exploration metrics: encoder: {scores.encoder}")

    notes = LiteralTable(title="Notes (runs not scored as plain 'ok')", title_justify="left")
    for col in ("Agent", "Task", "Note"):
        notes.add_column(col, overflow="fold")
    for name, _ in groups:
        for task, row in per_task[name].iterrows():
            if row["note"] != "ok":
                notes.add_row(name, task, wrapped(row["note"]))
    if notes.row_count:
        tables.append(notes)
    return tables


def _cell(tasks: pd.DataFrame, task: str, col: str, process: bool = False, smoke: bool = False) -> str:
    if task not in tasks.index:
        return "-"
    row = tasks.loc[task]
    if process:
        return process_cell(col, row[col], row[f"{col}_sem"])
    return ni_cell(row[col], row[f"{col}_sem"], smoke) if col in ("ni", "ni_val") else fmt(row[col], row[f"{col}_sem"])


def aup_rich(scores: Scores) -> list:
    if all(group.smoke for group, _ in scores.groups()):
        return [f"AUP: none ({SMOKE_NOTE})"]
    table = aup_table(scores)
    seeds = int(scores.runs.groupby(["group", "task"]).size().max())
    smoke = {group.label for group, _ in scores.groups() if group.smoke}
    out = LiteralTable(title="AUP (MLGym performance profiles)", title_justify="left")
    out.add_column("Profile", no_wrap=True)
    for solver in table.index:
        out.add_column(solver, justify="right", no_wrap=True)
    for profile, column in (("Best attempt (val)", "aup_best_attempt"), ("Final (test)", "aup_final")):
        out.add_row(profile, *["-" if solver in smoke else fmt(value) for solver, value in table[column].items()])
    about = (f"AUP over {table['tasks'].iloc[0]} task(s), the baseline as a solver, each solver's best of "
             f"{seeds} seed(s); tau from 0 to {table['tau_max'].iloc[0]:.1f}")
    if smoke:
        about += f"; {', '.join(sorted(smoke))}: {SMOKE_NOTE}, no AUP"
    return [out, about]


def failures_items(scores: Scores) -> list:
    """The runs that failed, counted by cause (agent, infra, provider, budget): one line for one run group, a
    table for several; nothing where none failed."""
    pairs = scores.groups()
    if len(pairs) == 1:
        line = causes.counts_line(scores)
        return [line] if line else []
    if not causes.counts(scores):
        return []
    frame = causes.counts_frame(pairs)
    table = LiteralTable(title="Failures by cause (runs)", title_justify="left")
    table.add_column("Cause", no_wrap=True)
    for label in frame.columns:
        table.add_column(label, justify="right", no_wrap=True)
    for cause, row in frame.iterrows():
        table.add_row(cause, *[str(n) for n in row])
    left_out = causes.infra_runs(scores)
    return [table, *([f"{causes.INFRA_NOTE}: {', '.join(left_out)}"] if left_out else [])]


def compute_items(scores: Scores) -> list:
    """Per run group that held GPUs, its GPU-hours and NI per GPU-hour, one line each."""
    return [line for group, part in scores.groups()
            if (line := compute.compute_line(group.label, compute.group_compute(part)))]


def summary_items(scores: Scores) -> list:
    """What a session's summary shows, in order (rich tables and the lines between them): one agent's
    three tables, or the agents side by side, then the failures by cause and the GPU time, then AUP. Runs the
    infrastructure failed are counted there and left out of every number. The terminal and the HTML report
    both use it."""
    if scores.runs.empty:
        return []
    compute.with_gpu_hours(scores)
    own = causes.agents_own(scores)
    groups = own.groups()
    if len(groups) == 1:
        group, part = groups[0]
        items = agent_tables(part, printable(group.title), smoke=group.smoke)
    else:
        items = side_by_side(own) if groups else []
    # the audit's research review (the fourth table) and suspect runs, then AUP
    from ..audit.tables import audit_items

    from .human_baseline import human_items

    return [*items, *failures_items(scores), *compute_items(own),
            *((*audit_items(own.runs), *aup_rich(own), *human_items(own)) if groups else ())]


def render(runs: Scores | list, width: int = 160, encoder: Any = AUTO) -> str:
    scores = as_scores(runs, encoder)
    if scores.runs.empty:
        return ""
    console, buffer = _console(width)
    for item in summary_items(scores):
        print_whole(console, item)
    return buffer.getvalue()
