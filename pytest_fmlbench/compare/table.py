"""A comparison as a rich table (terminal), CSV and JSON, and the regression lines of the gate."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import pandas as pd
from rich.console import Console
from rich.table import Table

from .diff import RULE, Comparison, Delta, TaskComparison


def _num(value: float, digits: int = 4, signed: bool = False) -> str:
    if value is None or math.isnan(value):
        return "n/a"
    return f"{value:+.{digits}g}" if signed else f"{value:.{digits}g}"


def _pm(value: float, sem: float, signed: bool = False) -> str:
    text = _num(value, signed=signed)
    if text != "n/a" and sem is not None and not math.isnan(sem):
        text += f" ± {sem:.2g}"
    return text


def _seeds(t: TaskComparison) -> str:
    if t.paired:
        unpaired = (len(t.old_seeds) - t.paired) + (len(t.new_seeds) - t.paired)
        return f"{t.paired} paired" + (f" (+{unpaired} unpaired)" if unpaired else "")
    return f"{len(t.old_seeds)} / {len(t.new_seeds)} (none paired)"


def regression_line(t: TaskComparison) -> str:
    return (f"regression: {t.task} ({t.solver}): NI {_num(t.ni.old)} -> {_num(t.ni.new)} "
            f"(drop {_num(t.drop())}; {t.ni.verdict})")


def render(comparison: Comparison, width: int = 160, threshold: float | None = None) -> str:
    buffer = io.StringIO()
    console = Console(file=buffer, width=width, force_terminal=False, color_system=None)
    table = Table(title=f"Comparison: {comparison.old_label} (old) -> {comparison.new_label} (new)",
                  title_justify="left")
    for col, justify in (("Agent/model", "left"), ("Task", "left"), ("Seeds", "left"), ("NI old", "right"),
                         ("NI new", "right"), ("Δ NI", "right"), ("NI change", "left"), ("Test old", "right"),
                         ("Test new", "right"), ("Δ test", "right"), ("Test change", "left")):
        table.add_column(col, justify=justify, overflow="fold")
    regressed = {id(t) for t in comparison.regressions(threshold)} if threshold is not None else set()
    for t in comparison.tasks:
        arrow = "↑" if t.direction == "higher" else "↓"
        ni = _cells(t.ni)
        if id(t) in regressed:
            ni[3] = f"REGRESSION (drop > {threshold:g}); {ni[3]}"
        table.add_row(t.solver, t.task, _seeds(t), *ni, *_cells(t.test, unit=f" {t.metric} {arrow}"))
    console.print(table)
    for name, only in (("OLD", comparison.only_old), ("NEW", comparison.only_new)):
        if only:
            console.print(f"only in {name} ({comparison.old_label if name == 'OLD' else comparison.new_label}): "
                          + ", ".join(f"{task} ({solver})" for solver, task in only))
    console.print(f"matched on {comparison.matching}; deltas are new - old, mean ± SEM over paired seeds; {RULE}")
    return buffer.getvalue()


def _cells(d: Delta, unit: str = "") -> list[str]:
    return [_pm(d.old, d.old_sem), _pm(d.new, d.new_sem), _pm(d.delta, d.sem, signed=True) + unit, d.verdict]


def write_csv(comparison: Comparison, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # tasks on one side only are rows too, with only_in saying which side
    extra = [{"solver": s, "task": t, "only_in": "old"} for s, t in comparison.only_old] + \
            [{"solver": s, "task": t, "only_in": "new"} for s, t in comparison.only_new]
    frame = pd.concat([comparison.frame().assign(only_in=""), pd.DataFrame(extra)], ignore_index=True)
    frame.to_csv(path, index=False)
    return path


def write_json(comparison: Comparison, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(comparison.as_dict(), indent=2))
    return path
