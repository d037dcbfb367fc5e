"""Paired deltas of NI, of the signed improvement and of the test value between two sides, whether they
exceed the noise, and what size of change the seeds could have told from it.

Runs are matched per (agent, model, task); when each side holds one agent/model and they differ (one
agent against another), per task. Within a task, runs are paired by seed where both sides have it.

The noise rule (``RULE``): with two or more paired seeds, a two-sided paired t-test on the per-seed
differences at p < 0.05; with no paired seeds but two or more on each side, Welch's t-test on the two
sides' values. Differences that are identical across seeds have no noise: any non-zero one exceeds it.
With one run a side, a task that declares its noise (task.yaml's ``noise``) is tested against its declared
seed noise (a z-test, the difference's sd being sqrt(2) x seed_sd); without it there is nothing to measure
the noise with: "no seeds: noise unknown". When the two sessions' machines differ (or one is not recorded),
a shift up to the task's declared kernel spread is noise too: a change must exceed the spread.

The gate looks at two measures: NI, clamped at 0 as the original's, and the signed improvement (NI
without the clamp), which alone sees a run that got worse than the baseline. A task regresses when
either fell by more than the threshold and by more than the noise (or its noise is unknown).

Detectable change: the smallest true drop the same test would find with 80% power at the seeds' spread
(noncentral t, :mod:`.power`); the kernel spread when the differences are the same on every seed (0 on
one machine: any change is real), unknown with one seed a side and no declared noise. Where a drop of the
gate's threshold could go unseen (detectable above it, unknown, or a drop beyond it within the noise),
the gate says "cannot tell" instead of "no regression", and the session does not fail for it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from . import power as pw
from .machines import MachineDifference, difference
from .sides import Side

ALPHA = pw.ALPHA
RULE = (f"a change exceeds the noise when a two-sided t-test over seeds gives p < {ALPHA} (paired by seed when "
        "both sides have the seed, else Welch's); with one seed a side, a z-test against the seed noise task.yaml "
        "declares, or else the noise is unknown; on different machines a change must exceed the task's kernel spread")
POWER = pw.POWER
POWER_RULE = (f"'detectable' is the smallest drop that test would find with {POWER:.0%} power at the seeds' "
              "spread (noncentral t)")
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
    # the standard deviation of one seed's difference (NaN: unknown), whether it is task.yaml's declared seed
    # noise (one seed a side) rather than the seeds' own, and the kernel spread a change must exceed
    sd: float = NAN
    declared: bool = False
    margin: float = 0.0

    @property
    def within_noise(self) -> bool:
        return self.verdict.startswith("within")

    def seeds_needed(self, drop: float) -> int | None:
        """Paired seeds a side at which a drop of ``drop`` is found with POWER (:func:`.power.seeds_needed`)."""
        return pw.seeds_needed(drop, self.sd, self.margin, declared=self.declared)


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
    noise: pw.Noise | None = None

    @property
    def solver(self) -> str:
        return self.new_solver if self.old_solver == self.new_solver else f"{self.old_solver} -> {self.new_solver}"

    def drop(self, measure: str = "ni") -> float:
        """How much a measure (``ni`` or ``signed``) fell (positive = worse); NaN when a side has no value."""
        return 0.0 - getattr(self, measure).delta  # never -0

    def tripped(self, threshold: float) -> list[str]:
        """The gate's measures that fell by more than ``threshold`` and by more than the noise (or whose noise
        is unknown), by name."""
        return [name for name, measure in MEASURES
                if self.drop(measure) > threshold and not getattr(self, measure).within_noise]

    @property
    def powered(self) -> Delta:
        """The measure whose power the gate states: the signed improvement (NI's clamp at 0 hides a drop
        below the baseline), or NI where the signed improvement has no value."""
        return self.ni if self.signed.verdict.startswith("n/a") else self.signed

    def gate(self, threshold: float) -> tuple[str, str]:
        """("regression" | "cannot tell" | "ok", why): "cannot tell" where a drop of ``threshold`` could go
        unseen: a drop beyond it within the noise, a detectable drop above it, or noise unknown."""
        tripped = self.tripped(threshold)
        if tripped:
            return "regression", ", ".join(tripped)
        within = [f"{name} fell by {self.drop(m):.2g}, within noise" for name, m in MEASURES
                  if self.drop(m) > threshold and getattr(self, m).within_noise]
        if within:
            return "cannot tell", "; ".join(within)
        d = self.powered
        if d.verdict.startswith("n/a"):
            return "ok", "no value to compare"
        if math.isnan(d.detectable):
            return "cannot tell", "noise unknown: one seed a side and no noise declared in task.yaml"
        if d.detectable > threshold:
            return "cannot tell", f"detectable drop {d.detectable:.3g} > {threshold:g}"
        return "ok", f"a drop of {threshold:g} is detected with {POWER:.0%} power"

    def as_dict(self, threshold: float | None = None) -> dict[str, Any]:
        out = {"solver": self.solver, "old_solver": self.old_solver, "new_solver": self.new_solver,
               "task": self.task, "metric": self.metric, "direction": self.direction, "paired_seeds": self.paired,
               "old_seeds": " ".join(self.old_seeds), "new_seeds": " ".join(self.new_seeds),
               "declared_seed_sd_ni": self.noise.seed_sd if self.noise else NAN,
               "declared_kernel_spread_ni": self.noise.kernel_spread if self.noise else NAN,
               "kernel_spread_counted": self.signed.margin > 0 or self.ni.margin > 0}
        for name, d in (("ni", self.ni), ("signed", self.signed), ("test", self.test)):
            out.update({f"{name}_old": d.old, f"{name}_old_sem": d.old_sem, f"{name}_new": d.new,
                        f"{name}_new_sem": d.new_sem, f"{name}_delta": d.delta, f"{name}_delta_sem": d.sem,
                        f"{name}_p": d.p, f"{name}_verdict": d.verdict, f"{name}_detectable": d.detectable})
        if threshold is not None:
            gate, why = self.gate(threshold)
            needed = self.powered.seeds_needed(threshold)
            out.update({"gate": gate, "gate_why": why,
                        "seeds_needed": needed if needed else None})
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in out.items()}


@dataclass
class Comparison:
    old_label: str
    new_label: str
    tasks: list[TaskComparison]
    only_old: list[tuple[str, str]] = field(default_factory=list)  # (solver, task)
    only_new: list[tuple[str, str]] = field(default_factory=list)
    matching: str = "agent, model and task"
    machines: MachineDifference = field(default_factory=lambda: MachineDifference(False, []))

    def regressions(self, threshold: float) -> list[TaskComparison]:
        """Tasks whose NI or signed improvement fell by more than ``threshold`` and the noise."""
        return [t for t in self.tasks if t.tripped(threshold)]

    def cannot_tell(self, threshold: float) -> list[TaskComparison]:
        """Tasks without a regression where a drop of ``threshold`` could have gone unseen."""
        return [t for t in self.tasks if t.gate(threshold)[0] == "cannot tell"]

    def machines_line(self) -> str | None:
        from .machines import line

        return line(self.machines, {t.task: t.noise.kernel_spread for t in self.tasks if t.noise})

    def as_dict(self, threshold: float | None = None) -> dict[str, Any]:
        return {"old": self.old_label, "new": self.new_label, "matched_on": self.matching, "rule": RULE,
                "power": POWER_RULE, "gate_measures": [name for name, _ in MEASURES],
                "hardware_differs": self.machines.differs, "hardware": self.machines_line(),
                "tasks": [t.as_dict(threshold) for t in self.tasks],
                "only_old": [{"solver": s, "task": t} for s, t in self.only_old],
                "only_new": [{"solver": s, "task": t} for s, t in self.only_new]}

    def frame(self, threshold: float | None = None) -> pd.DataFrame:
        return pd.DataFrame([t.as_dict(threshold) for t in self.tasks])


def compare(old: Side, new: Side, noise: Mapping[str, pw.Noise] | None = None) -> Comparison:
    """``noise``: each task's declared noise by task id (:func:`.power.declared_noise`); tasks not in it have
    none."""
    noise = noise or {}
    machines = difference(old.hardware, new.hardware)
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
        tasks.append(_task(a, b, noise.get(b["task"].iloc[0]), machines.spread_is_noise))
    return Comparison(
        old.label, new.label, tasks,
        only_old=[label(k) for k in sorted(set(old_groups) - set(new_groups))],
        only_new=[label(k) for k in sorted(set(new_groups) - set(old_groups))],
        matching="task (one agent/model a side, different ones)" if across else "agent, model and task",
        machines=machines)


def _key(k: Any) -> tuple:
    return k if isinstance(k, tuple) else (k,)


def _task(a: pd.DataFrame, b: pd.DataFrame, noise: pw.Noise | None, spread_is_noise: bool) -> TaskComparison:
    a, b = _borrow_scale(a, b), _borrow_scale(b, a)
    a, b = a.set_index("seed"), b.set_index("seed")
    paired = sorted(set(a.index) & set(b.index), key=_seed_order)
    first = b.iloc[0]

    def delta(column: str, measure: str) -> Delta:
        seed_sd, spread = noise.on(measure) if noise else (NAN, 0.0)
        return _delta(a[column], b[column], paired, seed_sd=seed_sd, margin=spread if spread_is_noise else 0.0)

    return TaskComparison(
        old_solver=a["solver"].iloc[0], new_solver=b["solver"].iloc[0], task=first["task"], metric=first["metric"],
        direction=first["direction"], paired=len(paired), old_seeds=sorted(a.index, key=_seed_order),
        new_seeds=sorted(b.index, key=_seed_order), ni=delta("ni", "ni"), test=delta("raw_test", "test"),
        signed=delta("signed", "signed"), noise=noise)


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


def _delta(old: pd.Series, new: pd.Series, paired: list[str], seed_sd: float = NAN, margin: float = 0.0) -> Delta:
    """``seed_sd``: the task's declared seed noise on this measure's scale (NaN: none), used with one seed a
    side; ``margin``: the kernel spread a change must exceed (0 on the same machine)."""
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
    # the spread to test the change against: (SEM, degrees of freedom, sd of one seed's difference, p or NaN)
    if paired and len(x) >= 2:
        d = y - x
        delta, sem = _mean_sem(d)
        if np.all(d == d[0]):
            # identical differences on every seed: a deterministic change, no noise to beat but the spread
            return _deterministic(mo, so, mn, sn, delta, margin, "same on every seed")
        df, sd = len(d) - 1, float(d.std(ddof=1))
        p = float(stats.ttest_rel(y, x).pvalue) if not margin else NAN
    elif not paired and len(x) >= 2 and len(y) >= 2:
        delta, sem = mn - mo, math.sqrt(so ** 2 + sn ** 2)
        if sem == 0:
            return _deterministic(mo, so, mn, sn, delta, margin, "no spread")
        # Welch-Satterthwaite degrees of freedom; a seed's difference spreads as both sides' runs together
        df = sem ** 4 / (so ** 4 / (len(x) - 1) + sn ** 4 / (len(y) - 1))
        sd = math.sqrt(len(x) * so ** 2 + len(y) * sn ** 2)
        p = float(stats.ttest_ind(y, x, equal_var=False).pvalue) if not margin else NAN
    else:
        delta = mn - mo
        if math.isnan(seed_sd):
            return Delta(mo, so, mn, sn, delta, NAN, NAN, NO_SEEDS, margin=margin)
        if seed_sd == 0:
            return _deterministic(mo, so, mn, sn, delta, margin, "task.yaml declares no seed noise")
        # too few seeds to measure the spread: the task's declared seed noise, a z-test
        df, sd = math.inf, math.sqrt(2) * seed_sd
        sem, p = seed_sd * math.sqrt(1 / len(x) + 1 / len(y)), NAN
    if math.isnan(p):
        # beyond the margin in the direction of the change, at the two-sided critical value
        statistic = (abs(delta) - margin) / sem
        tail = stats.norm.sf(statistic) if math.isinf(df) else stats.t.sf(statistic, df)
        p = float(min(1.0, 2 * tail))
    declared = math.isinf(df)  # only the declared seed noise is known exactly
    notes = "".join([", seed noise from task.yaml" if declared else "",
                     f", beyond the kernel spread {margin:.2g}" if margin else ""])
    verdict = f"exceeds noise (p={p:.2g}{notes})" if p < ALPHA else f"within noise (p={p:.2g}{notes})"
    return Delta(mo, so, mn, sn, delta, sem, p, verdict, detectable=pw.detectable(sem, df, margin), sd=sd,
                 declared=declared, margin=margin)


def _deterministic(mo: float, so: float, mn: float, sn: float, delta: float, margin: float, why: str) -> Delta:
    """A change with no spread to beat: real if it exceeds the margin (the kernel spread, on other machines)."""
    if not delta:
        verdict = "no change"
    elif abs(delta) > margin:
        verdict = f"exceeds noise ({why})"
    else:
        verdict = f"within noise ({why}, within the kernel spread {margin:.2g})"
    p = 0.0 if verdict.startswith("exceeds") else 1.0
    return Delta(mo, so, mn, sn, delta, 0.0, p, verdict, detectable=margin, sd=0.0, margin=margin)
