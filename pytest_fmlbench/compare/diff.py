"""Paired deltas of NI, of the signed improvement and of the test value between two sides, whether they
exceed the noise, and what size of change the seeds could have told from it.

Runs are matched per (agent, model, task); when each side holds one agent/model and they differ (one
agent against another), per task. Within a task, runs are paired by seed where both sides have it.

The noise rule (``RULE``): with two or more paired seeds, a two-sided paired t-test on the per-seed
differences at p < 0.05; with no paired seeds but two or more on each side, Welch's t-test on the two
sides' values. Differences that are identical across seeds have no noise: any non-zero one exceeds it.
With one run a side there is nothing to measure the noise with: "no seeds: noise unknown".

The gate looks at two measures: NI, clamped at 0 as the original's, and the signed improvement (NI
without the clamp), which alone sees a run that got worse than the baseline. A task regresses when
either fell by more than the threshold.

Detectable change (``POWER``): the smallest true change the same t-test would find with 80% power at
the seeds' spread, (t_{1-alpha/2} + t_{0.8}) x SEM of the difference; 0 when the differences are the same
on every seed (any change is real), unknown with one seed a side.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .sides import Side

ALPHA = 0.05
RULE = (f"a change exceeds the noise when a two-sided t-test over seeds gives p < {ALPHA} (paired by seed when "
        "both sides have the seed, else Welch's); with one seed a side the noise is unknown")
POWER = 0.8
POWER_RULE = (f"'detectable' is the smallest change that t-test would find with {POWER:.0%} power at the seeds' "
              "spread")
NO_SEEDS = "no seeds: noise unknown"
# the gate's measures, as its lines name them: (name, attribute of TaskComparison)
SIGNED = "signed improvement"
MEASURES = ((SIGNED, "signed"), ("NI", "ni"))
NAN = float("nan")


@dataclass
class Delta:
    """mean ± SEM of new - old over paired seeds (or of the two sides' means when none pair)."""

    old: float
    old_sem: float
    new: float
    new_sem: float
    delta: float
    sem: float
    p: float
    verdict: str
    # the smallest change the test would find with POWER at this spread; 0 when noiseless, NaN when unknown
    detectable: float = NAN


@dataclass
class TaskComparison:
    old_solver: str
    new_solver: str
    task: str
    metric: str
    direction: str
    paired: int
    old_seeds: list[str]
    new_seeds: list[str]
    ni: Delta
    test: Delta
    signed: Delta

    @property
    def solver(self) -> str:
        return self.new_solver if self.old_solver == self.new_solver else f"{self.old_solver} -> {self.new_solver}"

    def drop(self, measure: str = "ni") -> float:
        """How much a measure (``ni`` or ``signed``) fell (positive = worse); NaN when a side has no value."""
        return 0.0 - getattr(self, measure).delta  # never -0

    def tripped(self, threshold: float) -> list[str]:
        """The gate's measures that fell by more than ``threshold``, by name."""
        return [name for name, measure in MEASURES
                if not math.isnan(self.drop(measure)) and self.drop(measure) > threshold]

    def as_dict(self) -> dict[str, Any]:
        out = {"solver": self.solver, "old_solver": self.old_solver, "new_solver": self.new_solver,
               "task": self.task, "metric": self.metric, "direction": self.direction, "paired_seeds": self.paired,
               "old_seeds": " ".join(self.old_seeds), "new_seeds": " ".join(self.new_seeds)}
        for name, d in (("ni", self.ni), ("signed", self.signed), ("test", self.test)):
            out.update({f"{name}_old": d.old, f"{name}_old_sem": d.old_sem, f"{name}_new": d.new,
                        f"{name}_new_sem": d.new_sem, f"{name}_delta": d.delta, f"{name}_delta_sem": d.sem,
                        f"{name}_p": d.p, f"{name}_verdict": d.verdict, f"{name}_detectable": d.detectable})
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in out.items()}


@dataclass
class Comparison:
    old_label: str
    new_label: str
    tasks: list[TaskComparison]
    only_old: list[tuple[str, str]] = field(default_factory=list)  # (solver, task)
    only_new: list[tuple[str, str]] = field(default_factory=list)
    matching: str = "agent, model and task"

    def regressions(self, threshold: float) -> list[TaskComparison]:
        """Tasks whose NI or signed improvement fell by more than ``threshold``."""
        return [t for t in self.tasks if t.tripped(threshold)]

    def as_dict(self) -> dict[str, Any]:
        return {"old": self.old_label, "new": self.new_label, "matched_on": self.matching, "rule": RULE,
                "power": POWER_RULE, "gate_measures": [name for name, _ in MEASURES],
                "tasks": [t.as_dict() for t in self.tasks],
                "only_old": [{"solver": s, "task": t} for s, t in self.only_old],
                "only_new": [{"solver": s, "task": t} for s, t in self.only_new]}

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame([t.as_dict() for t in self.tasks])


def compare(old: Side, new: Side) -> Comparison:
    def solver(frame: pd.DataFrame) -> pd.Series:
        return frame["agent"] + "/" + frame["model"].astype(str)

    o, n = old.runs.assign(solver=solver(old.runs)), new.runs.assign(solver=solver(new.runs))
    olds, news = sorted(o["solver"].unique()), sorted(n["solver"].unique())
    across = len(olds) == 1 and len(news) == 1 and olds != news
    key = ["task"] if across else ["solver", "task"]
    old_groups = {_key(k): g for k, g in o.groupby(key)}
    new_groups = {_key(k): g for k, g in n.groupby(key)}

    def label(k: tuple) -> tuple[str, str]:
        return (f"{olds[0]} -> {news[0]}", k[0]) if across else (k[0], k[1])

    tasks = []
    for k in sorted(set(old_groups) & set(new_groups)):
        a, b = old_groups[k], new_groups[k]
        tasks.append(_task(a, b))
    return Comparison(
        old.label, new.label, tasks,
        only_old=[label(k) for k in sorted(set(old_groups) - set(new_groups))],
        only_new=[label(k) for k in sorted(set(new_groups) - set(old_groups))],
        matching="task (one agent/model a side, different ones)" if across else "agent, model and task")


def _key(k: Any) -> tuple:
    return k if isinstance(k, tuple) else (k,)


def _task(a: pd.DataFrame, b: pd.DataFrame) -> TaskComparison:
    a, b = _borrow_scale(a, b), _borrow_scale(b, a)
    a, b = a.set_index("seed"), b.set_index("seed")
    paired = sorted(set(a.index) & set(b.index), key=_seed_order)
    first = b.iloc[0]
    return TaskComparison(
        old_solver=a["solver"].iloc[0], new_solver=b["solver"].iloc[0], task=first["task"], metric=first["metric"],
        direction=first["direction"], paired=len(paired), old_seeds=sorted(a.index, key=_seed_order),
        new_seeds=sorted(b.index, key=_seed_order),
        ni=_delta(a["ni"], b["ni"], paired), test=_delta(a["raw_test"], b["raw_test"], paired),
        signed=_delta(a["signed"], b["signed"], paired))


def _borrow_scale(side: pd.DataFrame, other: pd.DataFrame) -> pd.DataFrame:
    """A session saved before NI's scale D was kept has none: it takes the other side's D for the same task
    when both have the same baseline test value (D depends on nothing else)."""
    from .sides import with_signed

    missing = side["ni_scale"].isna()
    if not missing.any():
        return side
    known = other.dropna(subset=["ni_scale"])
    scales = dict(zip(known["baseline_test"], known["ni_scale"]))
    filled = side["baseline_test"].map(scales)
    return with_signed(side.assign(ni_scale=side["ni_scale"].where(~missing, filled)))


def _seed_order(seed: str) -> tuple:
    return (0, int(seed), "") if str(seed).isdigit() else (1, 0, str(seed))


def _mean_sem(values: np.ndarray) -> tuple[float, float]:
    if len(values) == 0:
        return NAN, NAN
    mean = float(values.mean())
    sem = float(values.std(ddof=1) / math.sqrt(len(values))) if len(values) > 1 else NAN
    return mean, sem


def _delta(old: pd.Series, new: pd.Series, paired: list[str]) -> Delta:
    from scipy import stats

    if paired:
        x, y = old.loc[paired].to_numpy(float), new.loc[paired].to_numpy(float)
    else:
        x, y = old.to_numpy(float), new.to_numpy(float)
    ok_x, ok_y = ~np.isnan(x), ~np.isnan(y)
    if paired:
        keep = ok_x & ok_y
        x, y = x[keep], y[keep]
    else:
        x, y = x[ok_x], y[ok_y]
    (mo, so), (mn, sn) = _mean_sem(x), _mean_sem(y)
    if len(x) == 0 or len(y) == 0:
        return Delta(mo, so, mn, sn, NAN, NAN, NAN, "n/a (no value on one side)")
    if paired:
        d = y - x
        delta, sem = _mean_sem(d)
        if len(d) < 2:
            return Delta(mo, so, mn, sn, delta, sem, NAN, NO_SEEDS)
        if np.all(d == d[0]):
            # identical differences on every seed: a deterministic change, no noise to beat
            return Delta(mo, so, mn, sn, delta, 0.0, 0.0 if delta else 1.0,
                         "exceeds noise (same on every seed)" if delta else "no change", detectable=0.0)
        p = float(stats.ttest_rel(y, x).pvalue)
        df = len(d) - 1
    else:
        delta = mn - mo
        if len(x) < 2 or len(y) < 2:
            return Delta(mo, so, mn, sn, delta, NAN, NAN, NO_SEEDS)
        sem = math.sqrt(so ** 2 + sn ** 2)
        if sem == 0:
            return Delta(mo, so, mn, sn, delta, 0.0, 0.0 if delta else 1.0,
                         "exceeds noise (no spread)" if delta else "no change", detectable=0.0)
        p = float(stats.ttest_ind(y, x, equal_var=False).pvalue)
        # Welch-Satterthwaite degrees of freedom
        df = sem ** 4 / (so ** 4 / (len(x) - 1) + sn ** 4 / (len(y) - 1))
    verdict = f"exceeds noise (p={p:.2g})" if p < ALPHA else f"within noise (p={p:.2g})"
    detectable = float((stats.t.ppf(1 - ALPHA / 2, df) + stats.t.ppf(POWER, df)) * sem)
    return Delta(mo, so, mn, sn, delta, sem, p, verdict, detectable=detectable)
