"""MLGym's performance profiles and AUP, computed by hand on two tasks and three solvers."""

import math

import numpy as np
import pytest

from pytest_fmlbench.scoring import Scores
from pytest_fmlbench.scoring.aup import BASELINE, Problem, aup_table, performance_ratios

from .records import record


def test_ratios_feasibility_and_penalty():
    solvers = ["A", "B", BASELINE]
    ratios, ceiling = performance_ratios(Problem("higher", {"A": 0.8, "B": 0.6, BASELINE: 0.5}), solvers)
    assert ratios == {"A": 1.0, "B": 0.8 / 0.6, BASELINE: 0.8 / 0.5} and ceiling == 2.0  # ceil(1.6 * 1.05)
    # worse than the baseline (or negative, or missing) is infeasible: worst feasible ratio x 1.05
    ratios, ceiling = performance_ratios(Problem("lower", {"A": 12.0, "B": 5.0, BASELINE: 10.0}), solvers)
    assert ratios == {"A": 2.0 * 1.05, "B": 1.0, BASELINE: 2.0} and ceiling == 3.0
    ratios, _ = performance_ratios(Problem("higher", {"A": -1.0, "B": math.nan, BASELINE: 0.5}), solvers)
    assert ratios == {"A": 1.05, "B": 1.05, BASELINE: 1.0}
    # a perfect zero on a lower-is-better task: the others are infinitely far, never within any tau
    ratios, ceiling = performance_ratios(Problem("lower", {"A": 0.0, "B": 0.0, BASELINE: 3.0}), solvers)
    assert ratios == {"A": 1.0, "B": 1.0, BASELINE: math.inf} and ceiling == 2.0


def left_step_area(log_ratios, tau):
    """sum over the grid of (tau_{i+1} - tau_i) x share of tasks with log10(ratio) <= tau_i."""
    total = 0.0
    for i in range(len(tau) - 1):
        share = sum(1 for r in log_ratios if r <= tau[i]) / len(log_ratios)
        total += (tau[i + 1] - tau[i]) * share
    return total


def test_aup_by_hand_with_best_of_seeds():
    runs = [
        # task t1 (higher): A's best seed 0.8, B 0.6, baseline 0.5 (test); val: A 0.9, B 0.7, baseline 0.55
        (record(agent="A", task="t1", seed=0, test_metric=0.7, best_val=0.9, baseline_val=0.55, baseline_test=0.5), []),
        (record(agent="A", task="t1", seed=1, test_metric=0.8, best_val=0.85, baseline_val=0.55, baseline_test=0.5), []),
        (record(agent="B", task="t1", test_metric=0.6, best_val=0.7, baseline_val=0.55, baseline_test=0.5), []),
        # task t2 (lower): A worse than the baseline on test (infeasible), B 5, baseline 10; val A 8, B 9, baseline 9.5
        (record(agent="A", task="t2", direction="lower", norm_best=0.0, norm_worst="baseline", test_metric=12.0,
                best_val=8.0, baseline_val=9.5, baseline_test=10.0), []),
        (record(agent="B", task="t2", direction="lower", norm_best=0.0, norm_worst="baseline", test_metric=5.0,
                best_val=9.0, baseline_val=9.5, baseline_test=10.0), []),
    ]
    table = aup_table(Scores.from_runs(runs, encoder=None))
    # final: t1 ratios A 1, B 4/3, base 1.6 (ceil(1.68) = 2); t2 A 2.1, B 1, base 2 (ceil(2.1) = 3)
    # best attempt: t1 A 1, B 9/7, base 18/11 (ceil(1.718) = 2); t2 A 1, B 9/8, base 9.5/8 (ceil(1.246) = 2)
    tau_max = math.ceil(math.log10(3) * 10) / 10
    assert tau_max == 0.5 and table["tau_max"].iloc[0] == 0.5
    tau = np.linspace(0, tau_max, 500)
    final = {"A": [1.0, 2.1], "B": [4 / 3, 1.0], BASELINE: [1.6, 2.0]}
    best = {"A": [1.0, 1.0], "B": [9 / 7, 9 / 8], BASELINE: [18 / 11, 9.5 / 8]}
    for solver in ("A", "B", BASELINE):
        assert table.loc[solver, "aup_final"] == pytest.approx(left_step_area(np.log10(final[solver]), tau), abs=1e-12)
        assert table.loc[solver, "aup_best_attempt"] == pytest.approx(left_step_area(np.log10(best[solver]), tau), abs=1e-12)
    assert table.loc["A", "aup_best_attempt"] == pytest.approx(0.5, abs=1e-12)  # best on both tasks: the whole area
    assert list(table.index) == ["A", "B", BASELINE] and (table["tasks"] == 2).all()


def test_a_failed_test_competes_as_the_baseline_and_a_missing_task_as_infeasible():
    runs = [(record(agent="A", task="t1", test_metric=None, test_error="boom", best_val=0.7), []),
            (record(agent="B", task="t1", test_metric=0.9, best_val=0.7), []),
            (record(agent="B", task="t2", test_metric=0.9, best_val=0.7), [])]
    table = aup_table(Scores.from_runs(runs, encoder=None))
    # t1 final: A = baseline 0.6 -> ratio 1.5 like the baseline; t2: A has no run -> 1.5 x 1.05
    tau = np.linspace(0, math.ceil(math.log10(2) * 10) / 10, 500)
    assert table.loc["A", "aup_final"] == pytest.approx(left_step_area(np.log10([1.5, 1.575]), tau), abs=1e-12)
    assert table.loc[BASELINE, "aup_final"] == pytest.approx(left_step_area(np.log10([1.5, 1.5]), tau), abs=1e-12)
