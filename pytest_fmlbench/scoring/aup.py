"""MLGym's performance profiles and AUP score (Nathani et al., 2025), with the baseline as a solver.

Per task (a "problem"), each solver's score is compared with the best feasible one: ratio = best/score
when higher is better, score/best when lower is better. A score is feasible when it is non-negative
and at least as good as the baseline's; infeasible or missing scores get the task's worst feasible
ratio times (1 + 0.05). A solver's profile rho(tau) is the share of tasks where log10(ratio) <= tau,
on 500 evenly spaced tau from 0 to the largest log10(ceil(penalty ratio)) over all tasks and both
profiles, rounded up to one decimal; AUP is the left-step area under rho.

Two profiles, as MLGym's "best attempt" and "best submission": ``best_attempt`` uses each agent's best
validation value (the baseline's validation value for the baseline solver), ``final`` the credited
test value (baseline test on a failed or uncredited test). With several seeds a solver's score on a
task is its best seed (MLGym's AUP@K).

Beyond MLGym: each run group (:mod:`.groups`: one identity but the seed) is a solver, named by its label;
a smoke group is no solver (its runs check the code path on fixture data, against no declared baseline): it
keeps a row with no AUP, and its values move no other solver's ratios. A task whose baseline is unmeasured
is no problem of the profiles (nothing says which scores are feasible) and is not counted in ``tasks``. A zero best score on a lower-is-better task (or a zero score on a higher-is-better one)
gives an infinite ratio to the others, which is never within any tau, instead of dividing by zero.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .aggregate import Scores, best_over_seeds
from .groups import SMOKE_NOTE

EPSILON = 0.05
TAU_POINTS = 500
BASELINE = "declared baseline"  # the task's declared baseline values, as one more solver


@dataclass(frozen=True)
class Problem:
    direction: str
    scores: dict[str, float]  # solver -> score (NaN: no result); includes BASELINE


def performance_ratios(problem: Problem, solvers: list[str]) -> tuple[dict[str, float], float] | None:
    """Each solver's ratio to the best feasible score, and the task's tau ceiling; None if unusable."""
    base = problem.scores.get(BASELINE, math.nan)
    higher = problem.direction == "higher"
    feasible = {}
    for solver, score in problem.scores.items():
        if score is None or math.isnan(score) or score < 0.0:
            continue
        if (score >= base) if higher else (score <= base):
            feasible[solver] = score
    if not feasible:
        return None
    best = max(feasible.values()) if higher else min(feasible.values())

    def ratio(score: float) -> float:
        numerator, denominator = (best, score) if higher else (score, best)
        if denominator > 0:
            return numerator / denominator
        return 1.0 if numerator == 0 else math.inf

    ratios = {solver: ratio(score) for solver, score in feasible.items()}
    worst = max((r for r in ratios.values() if math.isfinite(r)), default=1.0)
    penalty = worst * (1 + EPSILON)
    return {solver: ratios.get(solver, penalty) for solver in solvers}, float(math.ceil(penalty))


def profiles(problems: dict[str, list[Problem]], solvers: list[str]) -> tuple[np.ndarray, dict[str, dict[str, np.ndarray]]]:
    """tau grid and rho per profile name and solver. ``problems``: profile name -> tasks' problems."""
    ratios: dict[str, list[dict[str, float]]] = {}
    ceilings = []
    for name, tasks in problems.items():
        ratios[name] = []
        for problem in tasks:
            result = performance_ratios(problem, solvers)
            if result is not None:
                ratios[name].append(result[0])
                ceilings.append(result[1])
    tau_max = math.ceil(math.log10(max(ceilings, default=1.0)) * 10) / 10 if ceilings else 0.0
    tau = np.linspace(0.0, tau_max, num=TAU_POINTS)
    rho = {}
    for name, per_task in ratios.items():
        logs = {solver: np.log10([r[solver] for r in per_task]) if per_task else np.array([]) for solver in solvers}
        rho[name] = {solver: (np.array([np.mean(logs[solver] <= t) for t in tau]) if per_task
                              else np.full(TAU_POINTS, np.nan)) for solver in solvers}
    return tau, rho


def area(rho: np.ndarray, tau: np.ndarray) -> float:
    """Left-step area: each step spans tau_i to tau_{i+1} at height rho(tau_i)."""
    return float(np.sum(np.diff(tau) * rho[:-1]))


def solver_name(agent: str, model: str) -> str:
    return agent if model in ("-", "", None) else f"{agent} / {model}"


def aup_table(scores: Scores) -> pd.DataFrame:
    """AUP (best attempt, final) per solver: every run group of ``scores`` (by its label) plus the baseline;
    a smoke group's row has no AUP (NaN) and a ``note`` saying why."""
    if scores.runs.empty:
        return pd.DataFrame(columns=["aup_best_attempt", "aup_final", "tasks"])
    all_groups = scores.groups()
    groups = {group.label: part.runs for group, part in all_groups if not group.smoke}
    smoke = [group.label for group, _ in all_groups if group.smoke]
    runs = scores.runs[~scores.runs["group"].isin(smoke)]
    solvers = [*groups, BASELINE]
    problems: dict[str, list[Problem]] = {"best_attempt": [], "final": []}
    # a task whose baseline is unmeasured has no feasibility bar: it is left out, and 'tasks' counts the rest
    runs = runs[runs["baseline_test"].notna() & runs["baseline_val"].notna()]
    for task, frame in runs.groupby("task", sort=True):
        direction = frame["direction"].iloc[0]
        for name, agent_col, base_col in (("best_attempt", "best_val", "baseline_val"),
                                          ("final", "raw_test", "baseline_test")):
            values = {solver: best_over_seeds(g.loc[g["task"] == task, agent_col], direction)
                      for solver, g in groups.items()}
            values[BASELINE] = float(frame[base_col].iloc[0])
            problems[name].append(Problem(direction, values))
    tau, rho = profiles(problems, solvers)
    table = pd.DataFrame({
        "aup_best_attempt": [area(rho["best_attempt"][s], tau) for s in solvers],
        "aup_final": [area(rho["final"][s], tau) for s in solvers],
    }, index=pd.Index(solvers, name="solver"))
    if smoke:
        rows = pd.DataFrame({"aup_best_attempt": math.nan, "aup_final": math.nan, "note": SMOKE_NOTE},
                            index=pd.Index(smoke, name="solver"))
        table = pd.concat([table.iloc[:-1], rows, table.iloc[-1:]])
    table["tasks"] = runs["task"].nunique()
    table["tau_max"] = float(tau[-1]) if len(tau) else 0.0
    return table
