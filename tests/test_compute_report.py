"""Compute beside the score (issue 49, point 4): the GPU-hours a run group's runs held and its NI per GPU-hour,
in the tables and session.json."""

import pytest

from pytest_fmlbench.cli import main
from pytest_fmlbench.record import RunStore
from pytest_fmlbench.reports.summary import SessionSummary

from scoring.records import write_run


def timed(run_dir, seconds: float) -> None:
    """Each recorded step of the run took ``seconds``."""
    store = RunStore(run_dir)
    store.rewrite_steps([step.model_copy(update={"duration_s": seconds, "cpu_s": seconds / 2})
                         for step in store.load_steps()])


def test_gpu_hours_held_and_ni_per_gpu_hour_beside_the_score(tmp_path, capsys) -> None:
    root = tmp_path / "runs"
    # agent a: two seeds, one GPU held, two steps of half an hour each (1 GPU-hour a run), NI 0.2 (test 0.8
    # against the baseline's 0.6, D = 1) and 0.4
    for seed, test in ((0, 0.8), (1, 1.0)):
        run = write_run(root, [(0.7, {"config.json": '{"lr": 1}'}), (0.72, {"config.json": '{"lr": 2}'})],
                        agent="a", seed=seed, test_metric=test, devices=["0"])
        timed(run, 1800.0)
    # agent b held no GPU: no GPU time, nothing to divide by
    timed(write_run(root, [(0.7, {"config.json": '{"lr": 1}'})], agent="b", test_metric=0.8), 1800.0)
    assert main(["score", str(root), "--encoder", "none", "--csv-dir", str(tmp_path / "csv")]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert ("Compute — a: 2 GPU-hours, NI per GPU-hour 0.3, 1 CPU-hours (GPU-hours: the GPUs each run held "
            "times") in out
    assert "Compute — b" not in out
    tables = {t.solver: t for t in SessionSummary.model_validate_json((tmp_path / "csv" / "session.json")
                                                                      .read_text()).tables}
    assert tables["a"].gpu_hours == pytest.approx(2.0) and tables["a"].ni_per_gpu_hour == pytest.approx(0.3)
    assert tables["b"].gpu_hours is None and tables["b"].ni_per_gpu_hour is None
    # the CPU time the kernel counted for the steps: two runs of two steps of 900 CPU-seconds, one of one
    assert tables["a"].cpu_hours == pytest.approx(1.0) and tables["b"].cpu_hours == pytest.approx(0.25)


def test_the_final_test_counts_in_a_runs_gpu_and_cpu_hours(tmp_path) -> None:
    from pytest_fmlbench.reports.compute import _hours_at

    run = write_run(tmp_path / "runs", [(0.7, {})], test_metric=0.8, devices=["0", "1"])
    timed(run, 1800.0)
    store = RunStore(run)
    record = store.load()
    record.final_test_s, record.final_test_cpu_s = 1800.0, 3600.0
    store.save(record)
    # two GPUs for the step's half hour and the final test's: 2 GPU-hours; 900 + 3600 CPU-seconds
    assert _hours_at(str(run)) == (pytest.approx(2.0), pytest.approx(1.25))
