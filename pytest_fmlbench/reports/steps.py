"""Per run, what each step did: action, plan, metric, usage, error tail, and its code's diff to its parent.

Everything here comes from the run directory (record.json, steps.jsonl, snapshots/) and is hostile
text as far as the page is concerned: it is returned raw and escaped where it is rendered.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..record import RunRecord, RunStore, StepRecord
from ..scoring.groups import RunGroup, identity_of
from ..scoring.runs import from_record
from .human_runs import shell_session

ERROR_TAIL_CHARS = 1500  # as much of an error as the agents' prompts carry
DIFF_MAX_LINES = 400


@dataclass(frozen=True)
class StepView:
    step: int
    parent: int | None
    action: str
    valid: bool
    is_best: bool
    metric: float | None
    best_so_far: float | None
    tokens: int
    cost_usd: float | None
    duration_s: float
    plan: str
    idea: str
    analysis: str
    error_tail: str
    diff_against: str  # "step N", "the baseline" or "" when there is nothing to compare with
    diff: str
    shell: str = ""  # a person's terminal during the step (--agent=human), as text

    @property
    def failure(self) -> str:
        """Why a failed step failed, in one line: its error's last line."""
        lines = [line.strip() for line in self.error_tail.splitlines() if line.strip()]
        return lines[-1] if lines else "failed, no error recorded"


@dataclass(frozen=True)
class RunView:
    record: RunRecord
    run_dir: Path
    steps: list[StepView]
    # where the run's LLM calls are in the page's transcript payload, and a summary per step (None: after
    # the last step); see reports.transcripts
    transcript: int | None = None
    calls: dict[int | None, Any] = field(default_factory=dict)
    # the run's group (every identity but the seed), labelled among the report's other groups by
    # scoring.groups.label_groups; the run's own, unlabelled, until then
    group: RunGroup = None  # type: ignore[assignment]

    def __post_init__(self) -> None:
        if self.group is None:
            object.__setattr__(self, "group", group_of(self.record))

    @property
    def label(self) -> str:
        """The run as the page names it: its group's whole title (options, steps, marks) and its seed."""
        return f"{self.group.title} / seed {self.record.seed}"

    @property
    def calls_model(self) -> bool:
        return self.record.usage.calls > 0 or self.record.usage.total_tokens > 0 or any(s.tokens for s in self.steps)


def group_of(record: RunRecord) -> RunGroup:
    return RunGroup(**identity_of(from_record(record, [])))


def tail(text: str, limit: int = ERROR_TAIL_CHARS) -> str:
    text = text or ""
    return text if len(text) <= limit else "…" + text[-limit:]


def unified_diff(old: dict[str, str] | None, new: dict[str, str] | None, old_name: str, new_name: str) -> str:
    """One unified diff over every file of two snapshots (added and removed files included)."""
    if old is None or new is None:
        return ""
    lines: list[str] = []
    for path in sorted(set(old) | set(new)):
        a, b = old.get(path), new.get(path)
        if a == b:
            continue
        lines += difflib.unified_diff((a or "").splitlines(keepends=True), (b or "").splitlines(keepends=True),
                                      fromfile=f"{old_name}/{path}" if a is not None else "/dev/null",
                                      tofile=f"{new_name}/{path}" if b is not None else "/dev/null")
    if len(lines) > DIFF_MAX_LINES:
        lines = lines[:DIFF_MAX_LINES] + [f"\n… {len(lines) - DIFF_MAX_LINES} more diff lines\n"]
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def _read_snapshot(store: RunStore, name: str | None) -> dict[str, str] | None:
    if not name:
        return None
    try:
        files = store.read_snapshot(name)
    except (OSError, ValueError):
        return None
    return files if isinstance(files, dict) else None


def run_view(record: RunRecord, steps: list[StepRecord], run_dir: Path) -> RunView:
    store = RunStore(Path(run_dir))
    snapshots = {s.step: _read_snapshot(store, s.snapshot) for s in steps}
    baseline = _read_snapshot(store, record.baseline_snapshot)
    better = (lambda a, b: a > b) if record.direction == "higher" else (lambda a, b: a < b)
    best: float | None = None
    views = []
    for s in steps:
        if s.success and s.metric is not None and (best is None or better(s.metric, best)):
            best = s.metric
        if s.parent is not None and s.parent in snapshots:
            against, old = f"step {s.parent}", snapshots[s.parent]
        else:
            against, old = ("the baseline", baseline) if baseline is not None else ("", None)
        diff = unified_diff(old, snapshots.get(s.step), "parent" if s.parent else "baseline", f"step{s.step}")
        error = s.error or (f"edit not applied: {s.edit_error}" if not s.edit_applied and s.edit_error else "")
        views.append(StepView(
            step=s.step, parent=s.parent, action=s.action, valid=s.success, is_best=s.is_best,
            metric=s.metric if s.success else None, best_so_far=best, tokens=s.usage.total_tokens,
            cost_usd=s.usage.cost_usd, duration_s=s.duration_s, plan=s.plan, idea=s.idea or "",
            analysis=s.analysis, error_tail=tail(error), diff_against=against if old is not None else "", diff=diff,
            shell=shell_session(s.extra),
        ))
    return RunView(record, Path(run_dir), views)
