"""The audit's tables, beside the original's three: the research review (the judges' rubric scores,
averaged over judges and then over seeds, with the judges and their cost named) and the suspect runs
with their reasons. Built from the scorer's rows (``Scores.runs``), so terminal, HTML and CSV agree."""

from __future__ import annotations

import math

import pandas as pd

from ..reports.text import LiteralTable, wrapped
from ..scoring.aup import solver_name
from .rubric import load_rubric


def _fmt(value: float, digits: int = 3) -> str:
    return "n/a" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}g}"


def _judged(runs: pd.DataFrame) -> pd.DataFrame:
    return runs[runs["judges"].astype(str) != ""] if "judges" in runs else runs.iloc[0:0]


def _judges_line(runs: pd.DataFrame) -> str:
    judged = _judged(runs)
    names = sorted({n.strip() for cell in judged["judges"] for n in str(cell).split(",") if n.strip()})
    costs = judged["judge_cost_usd"]
    cost = "unknown" if costs.isna().any() else f"${costs.sum():.4f}"
    return (f"judge{'s' if len(names) > 1 else ''} {', '.join(names)}"
            + (" (averaged)" if len(names) > 1 else "") + f"; judging cost {cost} for {len(judged)} run(s)")


def _with_solver(runs: pd.DataFrame) -> pd.DataFrame:
    """Each run's column: its run group (only seeds repeat within one), else its agent/model."""
    if "group" in runs:
        return runs.assign(solver=runs["group"].astype(str))
    return runs.assign(solver=[solver_name(a, m) for a, m in zip(runs["agent"], runs["model"])])


def research_table(runs: pd.DataFrame) -> list:
    """One run group: per task, each dimension (mean over seeds); several: the overall score per group."""
    judged = _with_solver(_judged(runs))
    if judged.empty:
        return []
    rubric = load_rubric()
    dims = [d for d in rubric.dimensions if f"review_{d.name}" in judged]
    if not dims:
        return [f"Research review: no judge gave a usable review ({_judges_line(runs)})"]
    solvers = sorted(judged["solver"].unique())
    title = f"Research review ({rubric.id}, 1-10) — {_judges_line(runs)}"
    table = LiteralTable(title=title, title_justify="left")
    table.add_column("Task", no_wrap=True)
    if len(solvers) == 1:
        for d in dims:
            table.add_column(d.title, justify="right", no_wrap=True)
        per_task = judged.groupby("task")[[f"review_{d.name}" for d in dims]].mean()
        for task, row in per_task.iterrows():
            table.add_row(task, *[_fmt(row[f"review_{d.name}"]) for d in dims])
        table.add_section()
        table.add_row("Mean", *[_fmt(per_task[f"review_{d.name}"].mean()) for d in dims])
        return [table]
    for name in solvers:
        table.add_column(f"{name} (overall)", justify="right", no_wrap=True)
    column = "review_overall" if "review_overall" in judged else f"review_{dims[0].name}"
    per_task = judged.groupby(["task", "solver"])[column].mean()
    for task in sorted(judged["task"].unique()):
        table.add_row(task, *[_fmt(per_task.get((task, name), math.nan)) for name in solvers])
    table.add_section()
    table.add_row("Mean", *[_fmt(per_task.xs(name, level="solver").mean()) for name in solvers])
    return [table]


def suspect_table(runs: pd.DataFrame) -> list:
    if "suspect" not in runs:
        return []
    audited = runs[runs["suspect"].notna()]
    if audited.empty:
        return []
    flagged = audited[audited["suspect"] > 0]
    if flagged.empty:
        return [f"Suspect runs: none of {len(audited)} audited run(s)"]
    table = LiteralTable(title=f"Suspect runs ({len(flagged)} of {len(audited)} audited; scores unchanged)",
                         title_justify="left")
    # the reasons keep a readable width however long an agent's name is
    for col, wrap in (("Agent", False), ("Task", False), ("Seed", False), ("Why", True)):
        table.add_column(col, no_wrap=not wrap, overflow="fold", min_width=40 if wrap else None)
    for _, row in _with_solver(flagged).sort_values(["task", "solver", "seed"]).iterrows():
        table.add_row(row["solver"], row["task"], str(row["seed"]),
                      wrapped(str(row["suspect_reasons"])))
    return [table]


def audit_items(runs: pd.DataFrame) -> list:
    """What the summary shows of the audit, after the original's tables (nothing for runs never audited)."""
    if runs.empty:
        return []
    return [*research_table(runs), *suspect_table(runs)]
