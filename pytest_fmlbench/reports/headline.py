"""The HTML report's first lines: per task, which run group did best, and by how much against the baseline.

The best group is the one whose credited test value (mean over seeds) is best in the task's direction: NI
is clamped at 0, so it cannot order groups that all did worse than the baseline, and the test value orders
them as the signed improvement would. A smoke group is never the best: it checks the code path on fixture
data, against no declared baseline; it is named apart, as smoke.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..scoring.aggregate import Scores
from ..scoring.groups import SMOKE_NOTE


@dataclass(frozen=True)
class GroupResult:
    label: str
    title: str
    seeds: int
    test: float
    test_sem: float
    ni: float
    ni_sem: float
    note: str


@dataclass(frozen=True)
class TaskHeadline:
    task: str
    metric: str
    direction: str
    baseline_test: float
    # the best group that is not smoke; None where every group is smoke or none has a test value
    best: GroupResult | None
    # how many groups that are not smoke ran the task
    contenders: int
    smoke: list[GroupResult]

    @property
    def beats_baseline(self) -> bool:
        if self.best is None or math.isnan(self.best.test) or math.isnan(self.baseline_test):
            return False
        if self.direction == "higher":
            return self.best.test > self.baseline_test
        return self.best.test < self.baseline_test

    @property
    def arrow(self) -> str:
        return "↑" if self.direction == "higher" else "↓"


def _result(group, row) -> GroupResult:
    return GroupResult(label=group.label, title=group.title, seeds=int(row["seeds"]), test=float(row["raw_test"]),
                       test_sem=float(row["raw_test_sem"]), ni=float(row["ni"]), ni_sem=float(row["ni_sem"]),
                       note=str(row["note"]))


def headlines(scores: Scores) -> list[TaskHeadline]:
    """One headline per task (the tables' task rows), in the tables' order."""
    if scores.runs.empty:
        return []
    per_group = [(group, part.per_task()) for group, part in scores.groups()]
    first = scores.runs.groupby("task").first()
    out = []
    for task in sorted(scores.runs["task"].unique()):
        direction = str(first.loc[task, "direction"])
        results = [(group.smoke, _result(group, tasks.loc[task])) for group, tasks in per_group if task in tasks.index]
        contenders = [r for smoke, r in results if not smoke and not math.isnan(r.test)]
        sign = 1.0 if direction == "higher" else -1.0
        best = max(contenders, key=lambda r: (sign * r.test, 0.0 if math.isnan(r.ni) else r.ni), default=None)
        out.append(TaskHeadline(task=str(task), metric=str(first.loc[task, "metric"]), direction=direction,
                                baseline_test=float(first.loc[task, "baseline_test"]), best=best,
                                contenders=sum(1 for smoke, _ in results if not smoke),
                                smoke=[r for smoke, r in results if smoke]))
    return out


__all__ = ["SMOKE_NOTE", "GroupResult", "TaskHeadline", "headlines"]
