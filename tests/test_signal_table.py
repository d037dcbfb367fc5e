"""scripts/signal_table.py: the noise floor, the headroom and their ratio it derives from measured test values."""

import importlib.util
import math
import statistics

import pytest

from pytest_fmlbench.spec import load_task

from conftest import REPO

SCRIPT = REPO / "scripts" / "signal_table.py"


@pytest.fixture(scope="module")
def table():
    spec = importlib.util.spec_from_file_location("signal_table", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def declared(task: str):
    return load_task(REPO / "task_suites" / task / "task.yaml").spec


def test_the_floor_is_the_larger_noise_and_the_headroom_the_best_stronger_method(table):
    task = "representation_learning_lightly"  # accuracy, higher is better, NI over [0, 1]
    base = declared(task).baseline.test
    seeds = [base - 0.01, base, base + 0.02, base + 0.01, base - 0.005]
    row = table.signal_row(task, {"kernel": {"default": base, "avx2": base - 0.004}, "seeds": seeds,
                                  "long": base + 0.03, "better": base + 0.05})
    assert row["kernel_spread"] == pytest.approx(0.004)
    assert row["seed_sd"] == pytest.approx(statistics.stdev(seeds)) and row["seeds"] == 5
    assert row["noise_floor"] == pytest.approx(statistics.stdev(seeds))  # the seeds' SD is the larger part
    assert row["headroom"] == pytest.approx(0.05)  # the hand-written method beat random search
    assert row["ratio"] == pytest.approx(statistics.stdev(seeds) / 0.05) and row["ok"] is False  # 0.24 > 1/5
    assert row["noise_floor_ni"] == pytest.approx(row["noise_floor"])  # D = 1 - 0
    assert row["headroom_ni"] == pytest.approx(0.05)


def test_a_lower_is_better_metric_gains_downwards(table):
    task = "causality_gcastle"
    spec = declared(task)
    assert spec.metric.direction == "lower"
    base = spec.baseline.test
    row = table.signal_row(task, {"kernel": {"default": base + 0.001}, "seeds": [base, base, base],
                                  "long": base - 0.5, "better": base + 1.0})
    assert row["kernel_spread"] == pytest.approx(0.001) and row["noise_floor"] == pytest.approx(0.001)
    assert row["headroom"] == pytest.approx(0.5)  # random search's lower value, not the worse method's
    assert row["ratio"] == pytest.approx(0.002) and row["ok"] is True


def test_no_floor_and_no_verdict_without_both_noises(table):
    task = "representation_learning_lightly"
    base = declared(task).baseline.test
    row = table.signal_row(task, {"kernel": {"default": base}, "better": base + 0.1})
    assert row["noise_floor"] is None and row["ratio"] is None and row["ok"] is None
    assert row["headroom"] == pytest.approx(0.1)


def test_a_run_that_broke_a_constraint_on_test_counts_as_the_baseline_not_as_its_own_value(table):
    """As the tables score it: random search's best-on-validation code may break the fairness floor on test."""
    records = [{"task": "fairness_fairlearn", "seed": 1, "test_metric": 0.05, "baseline_test": 0.2,
                "constraint_violated": True},
               {"task": "fairness_fairlearn", "seed": 0, "test_metric": 0.1, "baseline_test": 0.2,
                "constraint_violated": False}]
    assert table.scores_by_task(records) == {"fairness_fairlearn": [0.1, 0.2]}


def test_an_unmeasured_kernel_spread_is_the_declared_one_else_the_one_the_tolerance_holds(table, monkeypatch):
    """The task's noise.kernel_spread where it declares one (what the gate counts); without one,
    baseline_spread.py's tolerance, set at three times the farthest value it saw; no tolerance: none seen."""
    task = "robustness_and_reliability_art"  # declares a test tolerance
    spec = declared(task)
    base, tolerance = spec.baseline.test, spec.baseline.tolerance.test
    seeds = [base, base + 0.001, base - 0.001]

    def row_declaring(noise):
        spec_now = spec.model_copy(update={"noise": noise})
        monkeypatch.setattr(table, "load_task", lambda path: type("Task", (), {"spec": spec_now})())
        return table.signal_row(task, {"seeds": seeds, "better": base + 0.2})

    declared_spread = tolerance / 3 + 0.05  # not the tolerance's share, so the two sources tell apart
    row = row_declaring(spec.noise.model_copy(update={"kernel_spread": declared_spread}))
    assert row["kernel_from"] == "declared" and row["kernel_spread"] == pytest.approx(declared_spread)
    assert row["noise_floor"] == pytest.approx(max(declared_spread, statistics.stdev(seeds)))
    assert row["ratio"] == pytest.approx(row["noise_floor"] / 0.2)
    row = row_declaring(None)
    assert row["kernel_from"] == "declared" and row["kernel_spread"] == pytest.approx(tolerance / 3)
    assert row["noise_floor"] == pytest.approx(max(tolerance / 3, statistics.stdev(seeds)))


def test_a_transformed_metrics_ratio_is_taken_on_the_scored_scale(table):
    """A p-value scored as -log10 p: the picks' spread in p (about 1e-3) beside a headroom of about 0.2 in p
    would give a meaningless ratio; the tables and the gate see -log10 p."""
    task = "unlearning_open_unlearning"
    spec = declared(task)
    assert spec.metric.transform == "neg_log10"
    seeds = [1e-6, 1e-3, 1e-4, 3e-3, 5e-4]
    row = table.signal_row(task, {"kernel": {"default": spec.baseline.test}, "seeds": seeds, "better": 0.2})
    scored = [-math.log10(p) for p in seeds]
    d = -math.log10(spec.baseline.test)  # best 0, worst the baseline
    assert row["noise_floor_ni"] == pytest.approx(statistics.stdev(scored) / d)
    assert row["headroom_ni"] == pytest.approx((d + math.log10(0.2)) / d)
    assert row["ratio"] == pytest.approx(row["noise_floor_ni"] / row["headroom_ni"])
    assert row["ratio"] != pytest.approx(row["noise_floor"] / row["headroom"], rel=0.1)
