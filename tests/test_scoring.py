"""FML-bench's score definitions on hand-made records, every number computed by hand.

The rules are the original scorer's (compute_agent_metrics.py), including the cases where our scores
used to differ from it: a failed final test, no valid step, a constraint broken on test, a one-step run,
and the thresholds of first improvement and late gain.
"""

import math

import pytest

from pytest_fmlbench.record import Usage
from pytest_fmlbench.reports.tables import render
from pytest_fmlbench.scoring import Scores, ni_test, ni_val, process_metrics, run_note, score_run
from pytest_fmlbench.scoring.runs import from_record

from scoring.records import record, step

NAN = float("nan")


def row(rec, steps=()):
    return score_run(from_record(rec, list(steps)))


# -- normalized improvement ----------------------------------------------------------------------

def test_ni_higher_and_lower_is_better():
    assert ni_test(record(test_metric=0.7)) == pytest.approx(0.1, abs=1e-12)
    assert ni_test(record(test_metric=0.5)) == 0.0  # clipped at zero
    low = record(direction="lower", baseline_test=72, baseline_val=70, best_val=60, norm_best=0,
                 norm_worst="baseline", test_metric=36)
    assert ni_test(low) == 0.5  # D = |0 - 72|, (72 - 36) / 72
    # val side: D from the baseline *val* value when the worst bound is 'baseline': (70 - 60) / 70
    assert ni_val(low) == pytest.approx(10 / 70, abs=1e-15)
    assert ni_val(record(direction="lower", baseline_val=0.2, norm_best=0, norm_worst=1, best_val=0.1)) == \
        pytest.approx(0.1, abs=1e-15)


def test_failed_final_test_counts_as_the_baseline_and_is_labelled():
    rec = record(best_val=0.8, test_metric=None, test_error="test run failed: Traceback ...")
    r = row(rec)
    assert r["raw_test"] == 0.6 and r["ni"] == 0.0  # raw = baseline test, NI 0, not NaN
    assert r["note"].startswith("test failed -> baseline")
    assert r["val_test_gap"] == pytest.approx(0.3, abs=1e-15)  # NI_val (0.8 - 0.5) - NI_test 0
    # a crash before the test and a missing result are scored the same way, each with its label
    assert row(record(status="error", test_metric=None))["note"] == "run crashed -> baseline"
    assert row(record(status="error", test_metric=None))["ni"] == 0.0
    assert row(record(test_metric=None))["note"] == "test failed -> baseline"


def test_failed_test_is_counted_in_the_mean():
    runs = [(record(task="t", test_metric=0.9), []), (record(task="u", test_metric=None, test_error="boom"), [])]
    scores = Scores.from_runs(runs, encoder=None)
    assert scores.per_task().loc["u", "ni"] == 0.0
    assert scores.summary()["ni"] == pytest.approx((0.3 + 0.0) / 2, abs=1e-15)


def test_every_validation_step_failed_forces_test_and_val_to_the_baseline():
    # the baseline code was re-tested (0.6009 is re-run noise): the original credits the declared values
    rec = record(best_val=None, valid_steps=0, steps_used=2, test_metric=0.6009, test_on_baseline=True)
    r = row(rec, [step(1, None), step(2, None)])
    assert r["raw_test"] == 0.6 and r["ni"] == 0.0 and r["ni_val"] == 0.0 and r["val_test_gap"] == 0.0
    assert r["note"] == "all val failed -> baseline (no valid step: tested the baseline code)"
    assert r["valid_step_ratio"] == 0.0 and r["auc_steps"] == 0.0
    assert math.isnan(r["first_improvement_step"]) and math.isnan(r["late_gain_fraction"])
    assert math.isnan(r["best_improvement_step"])


def test_constraint_violated_on_test_shows_the_baseline_in_the_raw_column():
    r = row(record(test_metric=0.9, constraint_violated=True))
    assert r["raw_test"] == 0.6 and r["ni"] == 0.0
    assert r["note"] == "constraint violated on test (NI = 0) -> baseline"


def test_integrity_violation_never_scores_positive():
    # the violation ended the run before any test; the steps recorded before it were verified clean
    rec = record(test_metric=None, best_val=0.99, status="integrity_violated", integrity="violated",
                 integrity_violations=["train.py changed"], steps_used=2, valid_steps=2)
    r = row(rec, [step(1, 0.9), step(2, 0.99)])
    assert r["ni"] == 0.0 and r["raw_test"] == 0.6
    assert r["note"] == "integrity violated -> baseline"
    assert r["val_test_gap"] == pytest.approx(0.49, abs=1e-15)  # the original's gap: NI_val - 0
    # even a test value recorded before the violation was found earns nothing
    assert ni_test(record(test_metric=0.99, integrity="violated", status="integrity_violated")) == 0.0
    # and the label survives "no valid step"
    assert run_note(record(best_val=None, integrity="violated", status="integrity_violated")) == \
        "integrity violated -> baseline"


def test_our_extra_outcomes_are_labelled():
    stopped = record(test_metric=0.7, status="stopped", stop_reason="max_cost_usd 1.0 exceeded", sandbox="unsandboxed")
    assert run_note(stopped) == "ok; stopped by budget (max_cost_usd 1.0 exceeded); unsandboxed"
    assert ni_test(stopped) == pytest.approx(0.1, abs=1e-12)  # a stopped run is scored as it stands
    rerun = record(test_metric=0.7, final_val=None, final_val_error="validation re-run of the best code failed")
    assert run_note(rerun) == "ok; final val re-run failed, test still run"
    assert run_note(record(test_metric=0.7, sandbox="bwrap")) == "ok"


# -- process metrics -------------------------------------------------------------------------------

def test_process_metrics_by_hand():
    rec = record(best_val=0.8, test_metric=0.7, steps_used=4, valid_steps=3, wall_clock_s=7200,
                 usage=Usage(input_tokens=1_500_000, output_tokens=500_000, cost_usd=1.25))
    steps = [step(1, 0.4), step(2, None), step(3, 0.6), step(4, 0.8)]
    m = process_metrics(rec, steps)
    # G_k with best_0 = baseline val 0.5 and D = 1: [0, 0, 0.1, 0.3]
    assert m["auc_steps"] == pytest.approx(0.1, abs=1e-15)
    assert m["first_improvement_step"] == 3
    assert m["late_gain_fraction"] == 1.0  # (G_4 - G_2) / G_4 with G_2 = 0
    assert m["best_improvement_step"] == 4
    assert m["valid_step_ratio"] == 0.75
    assert m["val_test_gap"] == pytest.approx(abs(0.3 - 0.1), abs=1e-15)
    assert m["tokens_m"] == 2.0 and m["wall_clock_h"] == 2.0 and m["cost_usd"] == 1.25
    assert all(math.isnan(m[k]) for k in ("spread", "uniqueness", "reach", "effective_dim"))


def test_late_gain_uses_the_floor_of_half_the_steps():
    rec = record(best_val=0.9, test_metric=0.6, steps_used=5)
    m = process_metrics(rec, [step(1, 0.6), step(2, 0.7), step(3, 0.7), step(4, 0.9), step(5, 0.8)])
    # G = [0.1, 0.2, 0.2, 0.4, 0.4]; floor(5/2) = 2 -> (0.4 - 0.2) / 0.4
    assert m["late_gain_fraction"] == pytest.approx(0.5, abs=1e-12)
    assert m["auc_steps"] == pytest.approx(1.3 / 5, abs=1e-12)


def test_a_one_step_run_has_late_gain_zero():
    m = process_metrics(record(best_val=0.7, steps_used=1, test_metric=0.6), [step(1, 0.7)])
    # floor(1/2) - 1 indexes the curve from its end: the original compares G_1 with itself
    assert m["late_gain_fraction"] == 0.0
    assert m["first_improvement_step"] == 1 and m["best_improvement_step"] == 1


def test_improvement_thresholds_are_the_originals():
    # baseline val 0 and D = 1, so G equals the metric itself
    tiny = record(baseline_val=0.0, best_val=1e-16, steps_used=1, test_metric=0.6)
    m = process_metrics(tiny, [step(1, 1e-16)])
    assert math.isnan(m["first_improvement_step"])  # 1e-16 is not > 1e-15
    assert math.isnan(m["late_gain_fraction"])  # G_K = 1e-16 is not > 1e-12
    small = record(baseline_val=0.0, best_val=1e-13, steps_used=2, test_metric=0.6)
    m = process_metrics(small, [step(1, 1e-14), step(2, 1e-13)])
    assert m["first_improvement_step"] == 1  # 1e-14 > 1e-15
    assert math.isnan(m["late_gain_fraction"])  # 1e-13 is not > 1e-12


def test_no_improvement_gives_nan_late_gain_and_no_first_step():
    m = process_metrics(record(best_val=0.3, steps_used=2, valid_steps=2), [step(1, 0.3), step(2, 0.3)])
    assert math.isnan(m["late_gain_fraction"]) and math.isnan(m["first_improvement_step"])
    assert m["best_improvement_step"] == 2  # the last successful step reaching the best value
    assert m["auc_steps"] == 0.0


def test_non_finite_step_metrics_are_skipped_by_the_curve():
    rec = record(best_val=0.7, steps_used=3, test_metric=0.6)
    m = process_metrics(rec, [step(1, NAN, success=True), step(2, math.inf, success=True), step(3, 0.7)])
    assert m["auc_steps"] == pytest.approx(0.2 / 3, abs=1e-15)  # G = [0, 0, 0.2]
    assert m["valid_step_ratio"] == 1.0 and m["first_improvement_step"] == 3


def test_valid_ratio_divides_by_the_steps_used_and_is_nan_without_steps():
    assert process_metrics(record(steps_used=4), [step(1, 0.5), step(2, None)])["valid_step_ratio"] == 0.25
    m = process_metrics(record(steps_used=0, best_val=None), [])
    assert math.isnan(m["valid_step_ratio"]) and math.isnan(m["auc_steps"])


def test_neg_log10_transform_scores_forget_quality_as_the_original():
    # forget quality is a p-value (higher raw is better); scored as -log10, lower is better, D = baseline
    rec = record(direction="higher", metric_transform="neg_log10", baseline_val=1e-70, baseline_test=1e-160,
                 norm_best=0.0, norm_worst="baseline", best_val=1e-35, test_metric=1e-40, steps_used=2)
    r = row(rec, [step(1, 1e-80), step(2, 1e-35)])
    assert r["direction"] == "lower" and r["raw_test"] == pytest.approx(40.0) and r["baseline_test"] == pytest.approx(160.0)
    assert r["ni"] == pytest.approx((160 - 40) / 160, abs=1e-12)
    assert r["ni_val"] == pytest.approx((70 - 35) / 70, abs=1e-12)
    # curve on the scored scale, D = 70: [0 (80 is worse), 35/70]
    assert r["auc_steps"] == pytest.approx(0.25, abs=1e-12) and r["first_improvement_step"] == 2


# -- aggregation and display ------------------------------------------------------------------------

def test_seeds_aggregate_to_mean_and_sem_and_tasks_to_a_plain_mean():
    runs = [(record(seed=0, test_metric=0.7), []), (record(seed=1, test_metric=0.9), []),
            (record(task="u", test_metric=None, test_error="test run failed: boom"), [])]
    scores = Scores.from_runs(runs, encoder=None)
    tasks = scores.per_task()
    assert tasks.loc["t", "ni"] == pytest.approx(0.2, abs=1e-12) and tasks.loc["t", "ni_sem"] == pytest.approx(0.1, abs=1e-12)
    assert tasks.loc["u", "ni"] == 0.0 and math.isnan(tasks.loc["u", "ni_sem"])
    assert scores.summary()["ni"] == pytest.approx(0.1, abs=1e-12)  # (0.2 + 0) / 2
    text = render(scores)
    assert "test failed -> baseline" in text and "0.2 ± 0.1" in text
    assert "encoder: none (exploration metrics off)" in " ".join(text.split())


def test_unknown_cost_is_shown_as_unknown():
    runs = [(record(usage=Usage(input_tokens=10, cost_usd=None), test_metric=0.7), [])]
    assert math.isnan(process_metrics(*runs[0])["cost_usd"])
    assert "unknown" in render(runs, encoder=None)
