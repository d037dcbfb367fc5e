"""FML-bench's score definitions on hand-made records (reference.md, 'Scoring')."""

import math
from datetime import datetime, timezone

import pytest

from pytest_fmlbench.record import RunRecord, StepRecord, Usage
from pytest_fmlbench.report import render
from pytest_fmlbench.scoring import Scores, ni_test, ni_val, process_metrics


def record(**fields):
    base = dict(run_id="r", task="t", task_version=1, task_fingerprint="f", domain="d", agent="a", seed=0,
                steps_budget=4, metric_key="acc", direction="higher", baseline_val=0.5, baseline_test=0.6,
                norm_best=1.0, norm_worst=0.0, status="finished")
    base.update(fields)
    return RunRecord(**base)


def step(n, metric):
    return StepRecord(step=n, action="improve", success=metric is not None, metric=metric,
                      started_at=datetime.now(timezone.utc), snapshot="s", snapshot_sha256="x")


def test_ni_higher_and_lower_is_better():
    assert ni_test(record(test_metric=0.7)) == pytest.approx(0.1)
    assert ni_test(record(test_metric=0.5)) == 0.0  # clipped at zero
    low = record(direction="lower", baseline_test=72, baseline_val=70, norm_best=0, norm_worst="baseline", test_metric=36)
    assert ni_test(low) == pytest.approx(0.5)  # D = |0 - 72|
    assert ni_val(record(direction="lower", baseline_val=0.2, norm_best=0, norm_worst=1, best_val=0.1)) == pytest.approx(0.1)


def test_failed_test_is_nan_and_constraint_is_zero():
    assert math.isnan(ni_test(record(test_metric=None, test_error="test run failed")))
    assert ni_test(record(test_metric=0.9, constraint_violated=True)) == 0.0
    assert math.isnan(ni_test(record(test_metric=0.9, integrity="violated")))


def test_process_metrics():
    rec = record(best_val=0.8, test_metric=0.7, steps_used=4, valid_steps=3, wall_clock_s=7200,
                 usage=Usage(input_tokens=1_500_000, output_tokens=500_000))
    steps = [step(1, 0.4), step(2, None), step(3, 0.6), step(4, 0.8)]
    m = process_metrics(rec, steps)
    # G_k with best_0 = baseline val 0.5 and D = 1: [0, 0, 0.1, 0.3]
    assert m["auc_steps"] == pytest.approx(0.1)
    assert m["first_improvement_step"] == 3
    assert m["late_gain_fraction"] == pytest.approx((0.3 - 0.0) / 0.3)  # G_K vs G_floor(K/2) = G_2
    assert m["best_improvement_step"] == 4
    assert m["valid_step_ratio"] == 0.75
    assert m["val_test_gap"] == pytest.approx(abs(0.3 - 0.1))
    assert m["tokens_m"] == 2.0 and m["wall_clock_h"] == 2.0 and m["cost_usd"] == 0.0
    unknown = process_metrics(record(usage=Usage(input_tokens=10, cost_usd=None)), [])
    assert math.isnan(unknown["cost_usd"])
    assert "unknown" in render([(record(usage=Usage(input_tokens=10, cost_usd=None), test_metric=0.7), [])])
    assert all(math.isnan(m[k]) for k in ("spread", "uniqueness", "reach", "effective_dim"))


def test_no_improvement_gives_nan_late_gain_and_no_first_step():
    m = process_metrics(record(steps_used=2, valid_steps=2), [step(1, 0.3), step(2, 0.3)])
    assert math.isnan(m["late_gain_fraction"]) and math.isnan(m["first_improvement_step"])
    assert m["best_improvement_step"] == 2  # the last step reaching the best value


def test_seeds_aggregate_to_mean_and_sem_and_tasks_to_a_plain_mean():
    runs = [(record(seed=0, test_metric=0.7), []), (record(seed=1, test_metric=0.9), []),
            (record(task="u", test_metric=None, test_error="boom"), [])]
    tasks = Scores.from_runs(runs).per_task()
    assert tasks.loc["t", "ni"] == pytest.approx(0.2) and tasks.loc["t", "ni_sem"] == pytest.approx(0.1)
    assert math.isnan(tasks.loc["u", "ni"])
    assert Scores.from_runs(runs).summary()["ni"] == pytest.approx(0.2)  # NaN skipped
    text = render(runs)
    assert "test failed: boom" in text and "0.2 ± 0.1" in text
