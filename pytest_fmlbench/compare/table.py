"""A comparison as a rich table (terminal), CSV and JSON, and the regression lines of the gate."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import pandas as pd
from rich.console import Console

from .diff import NO_SEEDS, RULE, Comparison, Delta, TaskComparison
from ..reports.text import LiteralTable, print_whole
from ..safe_text import printable


def _num(value: float, digits: int = 3, signed: bool = False) -> str:
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
    return (f"regression: {printable(t.task)} ({printable(t.solver)}): NI {_num(t.ni.old)} -> {_num(t.ni.new)} "
            f"(drop {_num(t.drop())}; {t.ni.verdict})")


def render(comparison: Comparison, width: int = 160, threshold: float | None = None) -> str:
    buffer = io.StringIO()
    console = Console(file=buffer, width=width, force_terminal=False, color_system=None)
    table = LiteralTable(title=f"Comparison: {comparison.old_label} (old) -> {comparison.new_label} (new)",
                         title_justify="left")
    table.add_column("Agent/model", overflow="fold")
    table.add_column("Task", no_wrap=True)
    table.add_column("Seeds", overflow="fold")
    table.add_column("NI old -> new", justify="right", overflow="fold")
    table.add_column("Δ NI", justify="right", no_wrap=True)
    table.add_column("Test old -> new", justify="right", overflow="fold")
    table.add_column("Δ test", justify="right", overflow="fold")
    table.add_column("Beyond noise", overflow="fold")
    if threshold is not None:
        table.add_column(f"Gate: NI drop > {threshold:g}", no_wrap=True)
    regressed = {id(t) for t in comparison.regressions(threshold)} if threshold is not None else set()
    for t in comparison.tasks:
        arrow = "↑" if t.direction == "higher" else "↓"
        gate = [] if threshold is None else ["REGRESSION" if id(t) in regressed else "ok"]
        table.add_row(t.solver, t.task, _seeds(t), _old_new(t.ni), _pm(t.ni.delta, t.ni.sem, signed=True),
                      _old_new(t.test), f"{_pm(t.test.delta, t.test.sem, signed=True)} {t.metric} {arrow}",
                      noise(t), *gate)
    print_whole(console, table)
    for name, only in (("OLD", comparison.only_old), ("NEW", comparison.only_new)):
        if only:
            label = comparison.old_label if name == "OLD" else comparison.new_label
            print_whole(console, f"only in {name} ({printable(label)}): "
                        + ", ".join(f"{printable(task)} ({printable(solver)})" for solver, task in only))
    print_whole(console, f"matched on {comparison.matching}; deltas are new - old, mean ± SEM over paired seeds; {RULE}")
    return buffer.getvalue()


def _old_new(d: Delta) -> str:
    return f"{_pm(d.old, d.old_sem)} -> {_pm(d.new, d.new_sem)}"


def noise(t: TaskComparison) -> str:
    """Which of the two changes exceed the noise across seeds (the rule is printed under the table)."""
    verdicts = {"NI": t.ni, "test": t.test}
    beyond = [f"{name} (p={d.p:.2g})" for name, d in verdicts.items() if d.verdict.startswith("exceeds")]
    if beyond:
        return "yes: " + ", ".join(beyond)
    kinds = {d.verdict for d in verdicts.values()}
    if kinds == {NO_SEEDS}:
        return NO_SEEDS
    if kinds == {"no change"}:
        return "no change"
    ps = [f"{name} p={d.p:.2g}" for name, d in verdicts.items() if not math.isnan(d.p)]
    return "no" + (f" ({', '.join(ps)})" if ps else f": {t.ni.verdict}")


def write_csv(comparison: Comparison, path: Path) -> Path:
    from ..reports.csv_files import formula_safe  # the scorer's imports stay off the plugin's import path

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # tasks on one side only are rows too, with only_in saying which side
    extra = [{"solver": s, "task": t, "only_in": "old"} for s, t in comparison.only_old] + \
            [{"solver": s, "task": t, "only_in": "new"} for s, t in comparison.only_new]
    frame = pd.concat([comparison.frame().assign(only_in=""), pd.DataFrame(extra)], ignore_index=True)
    formula_safe(frame).to_csv(path, index=False)
    return path


def write_json(comparison: Comparison, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(comparison.as_dict(), indent=2))
    return path
