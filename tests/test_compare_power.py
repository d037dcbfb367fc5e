"""The gate's power, declared task noise and machines that differ: unit level, on synthetic sides (no runs)."""

import math
import shutil
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import yaml

from pytest_fmlbench.compare import Side, compare
from pytest_fmlbench.compare.power import Noise, declared_noise, detectable, power, seeds_needed
from pytest_fmlbench.reports.disclosure import Hardware

DATA = Path(__file__).parent / "data"
THRESHOLD = 0.05
LAPTOP = Hardware(cpu_model="Intel Core i7-1185G7", instruction_set=["avx", "avx2", "avx512f", "fma"])
RUNNER = Hardware(cpu_model="AMD EPYC 7763", instruction_set=["avx", "avx2", "fma"])


def side(label, signed_by_seed, task="t", hardware=LAPTOP):
    """One agent's runs of ``task``, a signed improvement (= NI above the baseline) per seed; D = 1."""
    return tasks_side(label, {task: signed_by_seed}, hardware)


def tasks_side(label, signed_by_task, hardware=LAPTOP):
    rows = [{"agent": "a", "model": "-", "task": task, "seed": seed, "metric": "accuracy", "direction": "higher",
             "transform": "none", "baseline_test": 0.5, "raw_test": 0.5 + s, "ni": max(s, 0.0), "ni_val": 0.0,
             "note": "ok", "ni_scale": 1.0} for task, signed in signed_by_task.items() for seed, s in enumerate(signed)]
    return Side.from_rows(label, rows, hardware=hardware)


def noise(seed_sd=0.0, kernel_spread=0.0):
    return {"t": Noise(seed_sd, kernel_spread, seed_sd, kernel_spread, "test machine, 2026-12-07")}


def test_power_is_the_t_tests_rejection_rate():
    """The noncentral t's power against the rate at which a paired t-test rejects simulated sessions."""
    from scipy import stats

    rng = np.random.default_rng(7)
    n, sd, drop = 5, 0.1, 0.12
    diffs = rng.normal(-drop, sd, size=(20_000, n))
    t = diffs.mean(axis=1) / (diffs.std(axis=1, ddof=1) / math.sqrt(n))
    rejected = np.mean(-t > stats.t.ppf(0.975, n - 1))
    assert power(drop, sd / math.sqrt(n), n - 1) == pytest.approx(rejected, abs=0.01)
    # the detectable drop is where that power reaches 80%, and a known spread (z-test) detects smaller drops
    mde = detectable(sd / math.sqrt(n), n - 1)
    assert power(mde, sd / math.sqrt(n), n - 1) == pytest.approx(0.8)
    assert detectable(sd / math.sqrt(n), math.inf) < mde
    # a margin (the kernel spread) adds to it; no spread: any change beyond the margin is seen
    assert detectable(sd / math.sqrt(n), n - 1, margin=0.05) == pytest.approx(mde + 0.05)
    assert detectable(0.0, n - 1) == 0 and math.isnan(detectable(float("nan"), n - 1))


def test_seeds_needed_for_a_drop():
    needed = seeds_needed(0.05, sd=0.1)
    assert needed is not None and needed > 2
    assert power(0.05, 0.1 / math.sqrt(needed), needed - 1) >= 0.8 > power(0.05, 0.1 / math.sqrt(needed - 1),
                                                                             needed - 2)
    assert seeds_needed(0.05, sd=0.1, declared=True) <= needed  # a declared spread is not estimated
    assert seeds_needed(0.05, sd=0.1, margin=0.05) is None  # within the kernel spread: never
    assert seeds_needed(0.05, sd=10.0) is None  # more than MAX_SEEDS
    assert seeds_needed(0.05, sd=float("nan")) == 0 and seeds_needed(0.05, sd=0.0) == 1


def test_sessions_that_differ_only_by_chance_are_not_regressions():
    """Many tasks of the same agent compared, noise only (sd 0.1 a seed): the mean drop often exceeds 0.05 by
    chance, yet the gate fails few (the test's alpha / 2) and says it cannot tell rather than 'no regression'."""
    rng = np.random.default_rng(11)
    tasks = [f"t{i}" for i in range(60)]
    comparison = compare(tasks_side("old", {t: rng.normal(0.3, 0.1, 5) for t in tasks}),
                         tasks_side("new", {t: rng.normal(0.3, 0.1, 5) for t in tasks}))
    assert sum(t.drop("signed") > THRESHOLD for t in comparison.tasks) >= 8  # the point estimate would fail these
    assert len(comparison.regressions(THRESHOLD)) <= 4  # about 1.5 expected
    # 5 seeds at sd 0.1 cannot see a drop of 0.05: never "ok"
    assert {t.gate(THRESHOLD)[0] for t in comparison.tasks} <= {"cannot tell", "regression"}

    # one seed a side, with the task's declared seed noise: a z-test, not the point estimate
    declared = {t: Noise(0.05, 0.0, 0.05, 0.0, "test machine") for t in tasks}
    comparison = compare(tasks_side("old", {t: rng.normal(0.3, 0.05, 1) for t in tasks}),
                         tasks_side("new", {t: rng.normal(0.3, 0.05, 1) for t in tasks}), noise=declared)
    assert sum(t.drop("signed") > THRESHOLD for t in comparison.tasks) >= 8
    assert len(comparison.regressions(THRESHOLD)) <= 4
    assert {t.gate(THRESHOLD)[0] for t in comparison.tasks} <= {"cannot tell", "regression"}


def test_a_planted_regression_is_caught_when_powered_and_cannot_tell_when_not():
    from pytest_fmlbench.compare.table import cannot_tell_line, gate_line, render

    rng = np.random.default_rng(3)
    base = rng.normal(0.3, 0.02, 8)
    # powered: 8 paired seeds with a small spread, a drop of 0.15
    comparison = compare(side("old", base), side("new", base - 0.15 + rng.normal(0, 0.02, 8)))
    (t,) = comparison.tasks
    assert t.gate(THRESHOLD)[0] == "regression" and t.signed.detectable < THRESHOLD
    assert comparison.regressions(THRESHOLD) == [t]
    assert t.powered.seeds_needed(THRESHOLD) <= 8

    # the same drop, 2 seeds with a wide spread: the drop shows, the test cannot tell it from noise
    comparison = compare(side("old", [0.3, 0.7]), side("new", [0.35, 0.35]))
    (t,) = comparison.tasks
    assert t.drop("signed") == pytest.approx(0.15) and not comparison.regressions(THRESHOLD)
    state, why = t.gate(THRESHOLD)
    assert state == "cannot tell" and "within noise" in why
    assert t.powered.seeds_needed(THRESHOLD) is None or t.powered.seeds_needed(THRESHOLD) > 2
    line = gate_line(comparison, THRESHOLD)
    assert "cannot tell for 1 task(s)" in line and "no regression" not in line
    assert cannot_tell_line(t, THRESHOLD).startswith("cannot tell: t (a/-): signed improvement fell by 0.15")

    # no drop at all, but one seed a side and a declared seed noise too wide to see 0.05: cannot tell either
    comparison = compare(side("old", [0.3]), side("new", [0.3]), noise=noise(seed_sd=0.1))
    (t,) = comparison.tasks
    assert t.gate(THRESHOLD) == ("cannot tell", f"detectable drop {t.signed.detectable:.3g} > 0.05")
    assert t.signed.declared and t.signed.seeds_needed(THRESHOLD) > 1
    table = render(comparison, width=250, threshold=THRESHOLD)
    assert "Seeds for 0.05" in table and "cannot tell" in table and "Detectable" in table
    # a small declared noise powers a one-seed comparison: a planted drop is caught, none is 'no regression'
    comparison = compare(side("old", [0.3]), side("new", [0.1]), noise=noise(seed_sd=0.01))
    assert comparison.tasks[0].gate(THRESHOLD)[0] == "regression"
    comparison = compare(side("old", [0.3]), side("new", [0.3]), noise=noise(seed_sd=0.01))
    assert comparison.tasks[0].gate(THRESHOLD)[0] == "ok"
    assert gate_line(comparison, THRESHOLD).endswith("no regression")


def test_sessions_from_different_machines_are_flagged_and_count_the_kernel_spread():
    from pytest_fmlbench.compare.table import render

    # the same deterministic drop of 0.0625 on every seed (exact in binary); the task's kernel spread is 0.08 NI
    old, new = [0.25, 0.375, 0.5], [0.1875, 0.3125, 0.4375]
    same = compare(side("old", old), side("new", new), noise=noise(kernel_spread=0.08))
    assert same.machines.differs is False and same.machines_line() is None
    assert same.tasks[0].gate(THRESHOLD)[0] == "regression"  # on one machine, a drop with no spread is real

    across = compare(side("old", old), side("new", new, hardware=RUNNER), noise=noise(kernel_spread=0.08))
    assert across.machines.differs is True and not across.regressions(THRESHOLD)
    (t,) = across.tasks
    assert t.gate(THRESHOLD)[0] == "cannot tell" and t.signed.margin == 0.08
    assert across.machines_line() == (
        "hardware differs: CPU 'Intel Core i7-1185G7' -> 'AMD EPYC 7763'; instruction set -avx512f; the kernel "
        "spread counts as noise (a drop must exceed it): t 0.08 NI")
    assert across.machines_line() in render(across, width=250, threshold=THRESHOLD).replace("\n", " ") or \
        "hardware differs: CPU" in render(across, width=400)
    # a drop beyond the spread is still caught across machines
    assert compare(side("old", old), side("new", [0.125, 0.25, 0.375], hardware=RUNNER),
                   noise=noise(kernel_spread=0.08)).regressions(THRESHOLD)
    # a GPU of another model is another machine too; a side without a record counts the spread as well
    gpu = compare(side("old", old, hardware=LAPTOP.model_copy(update={"gpu_models": ["NVIDIA H100"]})),
                  side("new", new), noise=noise(kernel_spread=0.08))
    assert "GPUs NVIDIA H100 -> none" in gpu.machines_line()
    unknown = compare(side("old", old, hardware=None), side("new", new), noise=noise(kernel_spread=0.08))
    assert unknown.machines_line().startswith("hardware unknown: the old side's machine is not recorded")
    assert not unknown.regressions(THRESHOLD)


def test_declared_noise_is_converted_to_ni_with_the_scorers_normalisation():
    from pytest_fmlbench.spec import TaskSpec

    spec = yaml.safe_load((DATA / "toy_task" / "task.yaml").read_text())
    spec["noise"] = {"kernel_spread": 0.02, "seed_sd": 0.01, "measured_on": "AMD EPYC, 2026-12-07"}
    spec["normalization"] = {"best": 1.0, "worst": "baseline"}  # D = 1 - 0.72
    got = declared_noise(TaskSpec.model_validate(spec))
    assert got.seed_sd == pytest.approx(0.01 / 0.28) and got.kernel_spread == pytest.approx(0.02 / 0.28)
    assert got.on("test") == (0.01, 0.02) and got.measured_on == "AMD EPYC, 2026-12-07"
    # a p-value scored as -log10: the raw spread is carried to the scored scale at the baseline
    spec.update(metric={"key": "p", "direction": "higher", "transform": "neg_log10"},
                baseline={"val": 0.01, "test": 0.01}, normalization={"best": 0.0, "worst": 4.0})
    got = declared_noise(TaskSpec.model_validate({**spec, "noise": {**spec["noise"], "seed_sd": 0.001}}))
    assert got.seed_sd == pytest.approx((-math.log10(0.009) + math.log10(0.011)) / 2 / 4)
    assert declared_noise(TaskSpec.model_validate({k: v for k, v in spec.items() if k != "noise"})) is None
    with pytest.raises(ValueError):
        TaskSpec.model_validate({**spec, "noise": {"kernel_spread": -1, "seed_sd": 0, "measured_on": "x"}})


def test_noise_declared_on_the_scored_scale_is_ni_over_d_and_only_for_a_transformed_metric():
    """A p-value near 0 scored as -log10 p: a spread of p says nothing of the scored scale (raw p's spread around
    a baseline of 1e-14 would leave the log's domain), so such a task declares its noise after the transform."""
    from pytest_fmlbench.spec import TaskSpec

    spec = yaml.safe_load((DATA / "toy_task" / "task.yaml").read_text())
    spec.update(metric={"key": "p", "direction": "higher", "transform": "neg_log10"},
                baseline={"val": 1e-13, "test": 1e-14}, normalization={"best": 0.0, "worst": "baseline"})  # D = 14
    scored = {"kernel_spread": 0.5, "seed_sd": 1.4, "scale": "scored", "measured_on": "AMD EPYC, 2026-12-07"}
    got = declared_noise(TaskSpec.model_validate({**spec, "noise": scored}))
    assert got.seed_sd == pytest.approx(0.1) and got.kernel_spread == pytest.approx(0.5 / 14)
    # the raw test value's seed spread is unknown (one seed a side cannot tell); the kernel spread, a margin, is
    # carried back to p at the baseline, on its wider side
    seed_sd, spread = got.on("test")
    assert math.isnan(seed_sd) and spread == pytest.approx(10 ** -13.5 - 1e-14)
    assert declared_noise(TaskSpec.model_validate({**spec, "noise": {**scored, "kernel_spread": 0.0}})).on(
        "test")[1] == 0.0
    # the same spread in p, as a metric-scale declaration, leaves the log's domain below the baseline: no scale
    assert math.isnan(declared_noise(TaskSpec.model_validate({**spec, "noise": {**scored, "scale": "metric"}})).seed_sd)
    untransformed = yaml.safe_load((DATA / "toy_task" / "task.yaml").read_text())
    with pytest.raises(ValueError, match="noise.scale: scored is for a transformed metric"):
        TaskSpec.model_validate({**untransformed, "noise": scored})


def test_the_gate_reads_the_noise_of_the_tasks_it_ran(tmp_path):
    from pytest_fmlbench.compare.gate import SessionGate

    task = tmp_path / "suite" / "toy_task"
    shutil.copytree(DATA / "toy_task", task)
    spec = yaml.safe_load((task / "task.yaml").read_text())
    spec["noise"] = {"kernel_spread": 0.0, "seed_sd": 0.02, "measured_on": "AMD EPYC, 2026-12-07"}
    (task / "task.yaml").write_text(yaml.safe_dump(spec))
    gate = SimpleNamespace(config=SimpleNamespace(rootpath=tmp_path))
    # a task folder's items: <folder relative to the root>::<id>[seed<n>]
    runs = {"suite/toy_task::toy_task[seed0]": (tmp_path / "run", False),
            "suite/toy_task::toy_task[seed1]": (tmp_path / "run1", False)}
    assert SessionGate.declared_noise(gate, runs) == {"toy_task": Noise(0.02, 0.0, 0.02, 0.0, "AMD EPYC, 2026-12-07")}


def test_the_machine_records_its_instruction_set_and_a_saved_session_keeps_it(tmp_path, monkeypatch):
    from pytest_fmlbench.compare import sessions
    from pytest_fmlbench.reports.provenance import instruction_set

    cpuinfo = "processor\t: 0\nmodel name\t: X\nflags\t\t: fpu sse sse2 avx2 avx512f fma hypervisor\n"
    assert instruction_set(cpuinfo, {"ATEN_CPU_CAPABILITY": "avx2"}) == [
        "avx2", "avx512f", "fma", "sse", "sse2", "ATEN_CPU_CAPABILITY=avx2"]
    assert instruction_set("Features\t: fp asimd sve\n", {}) == ["asimd", "sve"]
    path = sessions.save(tmp_path, [], commit="abc", args=[], exitstatus=0, hardware=RUNNER)
    assert sessions.load(path).side().hardware == RUNNER


def test_fmlbench_compare_reads_machines_from_sessions_and_noise_from_task_folders(tmp_path, capsys):
    import json

    from pytest_fmlbench.cli import main
    from pytest_fmlbench.compare import sessions
    from pytest_fmlbench.compare.sides import folder_hardware

    suite = tmp_path / "suite"
    shutil.copytree(DATA / "toy_task", suite / "toy_task")
    spec = yaml.safe_load((suite / "toy_task" / "task.yaml").read_text())
    # accuracy normalised by D = 1: the declared values are NI already
    spec["noise"] = {"kernel_spread": 0.03, "seed_sd": 0.01, "measured_on": "AMD EPYC, 2026-12-07"}
    (suite / "toy_task" / "task.yaml").write_text(yaml.safe_dump(spec))

    def saved(test_value, hardware):
        row = {"agent": "a", "model": "-", "task": "toy_task", "seed": "0", "metric": "accuracy",
               "direction": "higher", "transform": "none", "baseline_test": 0.72, "raw_test": test_value,
               "ni": test_value - 0.72, "ni_val": 0.0, "note": "ok", "ni_scale": 1.0}
        return sessions.save(tmp_path / "sessions", [("n", tmp_path / "run", row)], commit="abc", args=[],
                             exitstatus=0, hardware=hardware)

    old, new = saved(0.80, LAPTOP), saved(0.78, RUNNER)
    args = ["compare", str(old), str(new), "--tasks", str(suite), "--width", "250", "--json", str(tmp_path / "c.json")]
    assert main([*args, "--fail-on-regression", "0.01"]) == 0
    out = capsys.readouterr().out
    assert "hardware differs: CPU 'Intel Core i7-1185G7' -> 'AMD EPYC 7763'; instruction set -avx512f; the kernel " \
           "spread counts as noise (a drop must exceed it): toy_task 0.03 NI" in out
    assert "cannot tell: toy_task (a/-): signed improvement fell by 0.02, within noise" in out
    assert "no number of seeds sees a drop of 0.01: the kernel spread 0.03 counts as noise" in out
    (row,) = json.loads((tmp_path / "c.json").read_text())["tasks"]
    assert row["gate"] == "cannot tell" and row["kernel_spread_counted"] and row["seeds_needed"] is None
    assert row["declared_seed_sd_ni"] == pytest.approx(0.01)

    # a drop beyond the spread and the seed noise fails the gate; --seeds-for alone only shows the column
    worse = saved(0.60, RUNNER)
    assert main(["compare", str(old), str(worse), "--tasks", str(suite), "--fail-on-regression", "0.05"]) == 1
    assert "regression: toy_task (a/-): signed improvement fell by 0.2" in capsys.readouterr().out
    assert main(["compare", str(old), str(worse), "--tasks", str(suite), "--seeds-for", "0.05", "--width", "250"]) == 0
    assert "Seeds for 0.05" in capsys.readouterr().out

    # an output folder's machine is its session summary's
    (tmp_path / "out" / "reports").mkdir(parents=True)
    (tmp_path / "out" / "reports" / "session.json").write_text(json.dumps({"hardware": RUNNER.model_dump()}))
    assert folder_hardware(tmp_path / "out") == RUNNER and folder_hardware(tmp_path / "out" / "runs") == RUNNER
    assert folder_hardware(tmp_path) is None
