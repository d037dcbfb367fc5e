"""A comparison as a rich table (terminal), CSV and JSON, and the regression lines of the gate."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import pandas as pd
from rich.console import Console

from .diff import MEASURES, NO_SEEDS, POWER, POWER_RULE, RULE, SIGNED, Comparison, Delta, TaskComparison
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


def regression_line(t: TaskComparison, threshold: float = 0.0) -> str:
    """One line per regressed task, the measures that fell by more than ``threshold`` first, each with its noise
    and power."""
    tripped = t.tripped(threshold)
    parts = []
    for name, attr in sorted(MEASURES, key=lambda m: m[0] not in tripped):
        d = getattr(t, attr)
        if name in tripped:
            parts.append(f"{name} fell by {_num(t.drop(attr))} ({_num(d.old)} -> {_num(d.new)}, {d.verdict}"
                         f"{_detectable_suffix(d)})")
        else:
            parts.append(f"{name} {_num(d.old)} -> {_num(d.new)} (drop {_num(t.drop(attr))})")
    return f"regression: {printable(t.task)} ({printable(t.solver)}): " + "; ".join(parts)


def gate_line(comparison: Comparison, threshold: float) -> str:
    """The gate's verdict in one line, naming both measures and the threshold they share, and the tasks where
    a drop of the threshold could have gone unseen."""
    regressed = comparison.regressions(threshold)
    unclear = comparison.cannot_tell(threshold)
    measures = " or ".join(name for name, _ in MEASURES)
    tail = (f"; cannot tell for {len(unclear)} task(s), where such a drop could go unseen: "
            + ", ".join(printable(t.task) for t in unclear)) if unclear else ""
    if regressed:
        return (f"FAILED: {len(regressed)} task(s) lost more than {threshold:g} in {measures} against "
                f"{comparison.old_label}{tail}")
    if unclear:
        return f"no task lost more than {threshold:g} in {measures} against {comparison.old_label} beyond the noise{tail}"
    return (f"no task lost more than {threshold:g} in {measures} against {comparison.old_label}; each would "
            f"have been seen with {POWER:.0%} power: no regression")


def cannot_tell_line(t: TaskComparison, threshold: float) -> str:
    """One line per task whose comparison cannot tell whether it lost ``threshold``: why, and the seeds it needs."""
    _, why = t.gate(threshold)
    return (f"cannot tell: {printable(t.task)} ({printable(t.solver)}): {why}; "
            f"{seeds_text(t.powered.seeds_needed(threshold), threshold, t.powered)}")


def seeds_text(needed: int | None, threshold: float, d: Delta) -> str:
    """How many paired seeds a side a drop of ``threshold`` needs, in words."""
    if needed == 0:
        return f"seeds for a drop of {threshold:g}: unknown (declare the task's noise, or run --seeds 2 or more)"
    if needed is None:
        if d.margin >= threshold:
            return f"no number of seeds sees a drop of {threshold:g}: the kernel spread {d.margin:.2g} counts as noise"
        return f"a drop of {threshold:g} needs more than 100 seeds"
    return f"a drop of {threshold:g} needs {needed} seed(s) a side"


def power_line(comparison: Comparison) -> str:
    """What size of drop of the signed improvement each task's seeds could have told from the noise."""
    return (f"detectable drop of the {SIGNED} ({POWER:.0%} power, p < 0.05): "
            + ", ".join(f"{printable(t.task)} {detectable(t.powered)}" for t in comparison.tasks))


def detectable(d: Delta, short: bool = False) -> str:
    if d.verdict.startswith("n/a"):
        return "n/a"
    if math.isnan(d.detectable):
        return "unknown" if short else "unknown (one seed a side, no noise in task.yaml)"
    if d.detectable == 0:
        return "any" if short else "any (no spread)"
    return _num(d.detectable, digits=2) + ("" if short or not d.declared else " (task.yaml's seed noise)")


def _detectable_suffix(d: Delta) -> str:
    return f", detectable {_num(d.detectable, digits=2)}" if not math.isnan(d.detectable) and d.detectable else ""


def render(comparison: Comparison, width: int = 160, threshold: float | None = None,
           seeds_for: float | None = None) -> str:
    """``threshold``: the gate's (a column of its verdicts); ``seeds_for``: the drop whose seeds needed a column
    shows (default: the threshold)."""
    seeds_for = threshold if seeds_for is None else seeds_for
    buffer = io.StringIO()
    console = Console(file=buffer, width=width, force_terminal=False, color_system=None)
    table = LiteralTable(title=f"Comparison: {comparison.old_label} (old) -> {comparison.new_label} (new)",
                         title_justify="left")
    table.add_column("Agent/model", no_wrap=True)  # a name read whole, on one line
    table.add_column("Task", no_wrap=True)
    table.add_column("Seeds", overflow="fold")
    table.add_column("NI old -> new", justify="right", overflow="fold")
    table.add_column("Δ NI", justify="right", no_wrap=True)
    table.add_column("Signed old -> new", justify="right", overflow="fold")
    table.add_column("Δ signed", justify="right", no_wrap=True)
    table.add_column("Test old -> new", justify="right", overflow="fold")
    table.add_column("Δ test", justify="right", overflow="fold")
    table.add_column("Beyond noise", overflow="fold")
    table.add_column("Detectable", justify="right", overflow="fold")
    if seeds_for is not None:
        table.add_column(f"Seeds for {seeds_for:g}", justify="right", overflow="fold")
    if threshold is not None:
        table.add_column(f"Gate: drop > {threshold:g}", overflow="fold")
    for t in comparison.tasks:
        arrow = "↑" if t.direction == "higher" else "↓"
        gate = ([] if seeds_for is None else [_seeds_needed(t, seeds_for)]) + \
            ([] if threshold is None else [_gate(t, threshold)])
        table.add_row(t.solver, t.task, _seeds(t), _old_new(t.ni), _pm(t.ni.delta, t.ni.sem, signed=True),
                      _old_new(t.signed), _pm(t.signed.delta, t.signed.sem, signed=True),
                      _old_new(t.test), f"{_pm(t.test.delta, t.test.sem, signed=True)} {t.metric} {arrow}",
                      noise(t), detectable(t.powered, short=True), *gate)
    print_whole(console, table)
    machines = comparison.machines_line()
    if machines:
        print_whole(console, machines)
    for name, only in (("OLD", comparison.only_old), ("NEW", comparison.only_new)):
        if only:
            label = comparison.old_label if name == "OLD" else comparison.new_label
            print_whole(console, f"only in {name} ({printable(label)}): "
                        + ", ".join(f"{printable(task)} ({printable(solver)})" for solver, task in only))
    print_whole(console, f"matched on {comparison.matching}; deltas are new - old, mean ± SEM over paired seeds; "
                         f"{RULE}; {POWER_RULE}")
    gate = f"; the gate fails a task when either fell by more than {threshold:g}" if threshold is not None else ""
    print_whole(console, "NI is clamped at 0 (as the original's): a run worse than the baseline scores NI 0, like one "
                         f"that changed nothing; the {SIGNED} is NI without the clamp, (test - baseline test) / D in "
                         f"the better direction{gate}")
    if comparison.tasks:
        print_whole(console, power_line(comparison))
    return buffer.getvalue()


def _gate(t: TaskComparison, threshold: float) -> str:
    state, why = t.gate(threshold)
    # why it cannot tell is a line under the table: the column stays narrow
    return {"regression": f"REGRESSION: {why}", "cannot tell": "cannot tell"}.get(state, "ok")


def _seeds_needed(t: TaskComparison, threshold: float) -> str:
    needed = t.powered.seeds_needed(threshold)
    if needed == 0:
        return "unknown"
    if needed is None:
        return "none (spread)" if t.powered.margin >= threshold else "> 100"
    return str(needed)


def _old_new(d: Delta) -> str:
    return f"{_pm(d.old, d.old_sem)} -> {_pm(d.new, d.new_sem)}"


def noise(t: TaskComparison) -> str:
    """Which of the changes exceed the noise across seeds (the rule is printed under the table). The signed
    improvement is the test value's change over the same D on both sides: its test is the test value's."""
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


def write_csv(comparison: Comparison, path: Path, threshold: float | None = None) -> Path:
    from ..reports.csv_files import formula_safe  # the scorer's imports stay off the plugin's import path

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # tasks on one side only are rows too, with only_in saying which side
    extra = [{"solver": s, "task": t, "only_in": "old"} for s, t in comparison.only_old] + \
            [{"solver": s, "task": t, "only_in": "new"} for s, t in comparison.only_new]
    frame = pd.concat([comparison.frame(threshold).assign(only_in=""), pd.DataFrame(extra)], ignore_index=True)
    formula_safe(frame).to_csv(path, index=False)
    return path


def write_json(comparison: Comparison, path: Path, threshold: float | None = None) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(comparison.as_dict(threshold), indent=2))
    return path
