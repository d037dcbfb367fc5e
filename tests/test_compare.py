"""Compare and gate: real sessions of the plugin, a user agent whose quality an option sets."""

import csv
import json
import sys

import pytest


@pytest.fixture(autouse=True)
def no_encoder(monkeypatch):
    """The exploration metrics play no part in a comparison; loading their encoder would only cost time."""
    monkeypatch.setenv("FMLBENCH_ENCODER", "none")

# lr/epochs set the quality: lr=0.5, epochs=100 beats the baseline (test 0.72); lr=0.001, epochs=1 does not.
# With jitter, each seed trains a different number of epochs (session.rng is seeded by the seed), so
# seeds differ and the comparison has noise to measure.
TUNABLE_AGENT = """
    import json

    from pytest_fmlbench import Agent, AgentOptions, WholeFile

    class Options(AgentOptions):
        lr: float = 0.5
        epochs: int = 100
        jitter: bool = False

    class Tunable(Agent):
        name = "tunable"
        Options = Options

        def run(self, session):
            epochs = self.options.epochs + (session.rng.randint(0, 40) if self.options.jitter else 0)
            config = {"lr": self.options.lr, "epochs": epochs}
            edit = session.edit([WholeFile("config.json", json.dumps(config))])
            session.run_step("improve", plan="set lr and epochs", edit=edit)
"""
GOOD = ("--agent-opt", "lr=0.5", "--agent-opt", "epochs=100")
BAD = ("--agent-opt", "lr=0.001", "--agent-opt", "epochs=1")


def sessions_of(project):
    return sorted((project / "reports" / "fmlbench" / "sessions").glob("*.json"))


def fmlbench(pytester, *args):
    return pytester.run(sys.executable, "-m", "pytest_fmlbench.cli", *args)


def test_gate_fails_a_worse_session_with_one_line_per_task(pytester, toy, bench, write_agent):
    agent = f"--agent={write_agent(TUNABLE_AGENT, cls='Tunable')}"
    good = bench(agent, *GOOD, "--fmlbench-out=old", "toy_task")
    good.assert_outcomes(passed=1)
    old_ni = json.loads(next((pytester.path / "old" / "runs").rglob("record.json")).read_text())["test_metric"] - 0.72
    assert old_ni > 0.05  # the good configuration is provably better than the baseline

    result = bench(agent, *BAD, "--fmlbench-compare=old", "--fmlbench-fail-on-regression=0.05", "-n", "2", "toy_task")
    result.assert_outcomes(passed=1)  # every item passed, and still:
    assert result.ret == 1
    lines = [line for line in result.stdout.lines if line.startswith("regression:")]
    assert len(lines) == 1, result.stdout.str()
    # above the baseline, then below it: NI (clamped) and the signed improvement both fell by more than 0.05
    assert lines[0].startswith(f"regression: toy_task (tunable/-): signed improvement fell by ")
    assert f"; NI fell by {old_ni:.3g} ({old_ni:.3g} -> 0, no seeds: noise unknown)" in lines[0]
    result.stdout.fnmatch_lines(["*FML-bench comparison*", "*toy_task*",
                                 "detectable drop of the signed improvement (80% power, p < 0.05): toy_task unknown*",
                                 "FAILED: 1 task(s) lost more than 0.05 in signed improvement or NI against old"])

    # the same comparison without a threshold only prints
    shown = bench(agent, *BAD, "--fmlbench-compare=old", "toy_task")
    assert shown.ret == 0
    shown.stdout.fnmatch_lines(["*FML-bench comparison*"])
    assert not [line for line in shown.stdout.lines if line.startswith("regression:")]


def test_no_regression_passes_and_last_names_the_previous_session(pytester, toy, bench, write_agent):
    agent = f"--agent={write_agent(TUNABLE_AGENT, cls='Tunable')}"
    first = bench(agent, *BAD, "toy_task")
    first.assert_outcomes(passed=1)
    first.stdout.fnmatch_lines(["session saved as 0001_*; compare with it later: --fmlbench-compare=last"])
    assert len(sessions_of(pytester.path)) == 1

    better = bench(agent, *GOOD, "--fmlbench-compare=last", "--fmlbench-fail-on-regression=0.05", "toy_task")
    assert better.ret == 0, better.stdout.str()
    better.stdout.fnmatch_lines(["*no task lost more than 0.05 in signed improvement or NI against session 0001_*"])
    saved = sessions_of(pytester.path)
    assert [p.name[:5] for p in saved] == ["0001_", "0002_"]

    # 'last' is now the better session: the bad configuration, reused from its record, regresses against it
    worse = bench(agent, *BAD, "--fmlbench-compare=last", "--fmlbench-fail-on-regression=0.05", "toy_task")
    assert worse.ret == 1
    worse.stdout.fnmatch_lines(["regression: toy_task (tunable/-): signed improvement fell by *; NI fell by *-> 0, *",
                                "*against session 0002_*"])

    session = json.loads(saved[1].read_text())
    assert session["number"] == 2 and len(session["runs"]) == 1
    # the machine is kept with the session: a later comparison tells whether it ran on another one
    from pytest_fmlbench.reports.provenance import instruction_set

    assert session["hardware"]["instruction_set"] == instruction_set()
    run = session["runs"][0]
    assert run["nodeid"].endswith("toy_task[seed0]") and (pytester.path / "reports" / "fmlbench" / run["run_dir"]).is_dir()
    assert run["scores"]["ni"] > 0.05 and run["scores"]["task"] == "toy_task"

    # the command line takes the same names: last-1 (session 3's predecessor, the better one) against 1
    out = fmlbench(pytester, "compare", "1", "last-1", "--fmlbench-out", "reports/fmlbench", "--json", "cmp.json",
                   "--csv", "cmp.csv")
    assert out.ret == 0, out.stderr.str()
    out.stdout.fnmatch_lines(["*Comparison: session 0001_* (old) -> session 0002_* (new)*", "*toy_task*"])
    data = json.loads((pytester.path / "cmp.json").read_text())
    (row,) = data["tasks"]
    assert row["task"] == "toy_task" and row["ni_old"] == 0 and row["ni_delta"] > 0.05
    assert row["ni_verdict"] == "no seeds: noise unknown" and "t-test" in data["rule"]
    (csv_row,) = csv.DictReader((pytester.path / "cmp.csv").open())
    assert csv_row["task"] == "toy_task" and float(csv_row["ni_delta"]) == row["ni_delta"]


def test_seeds_give_mean_and_sem_and_say_which_changes_exceed_the_noise(pytester, toy, bench, write_agent):
    agent = f"--agent={write_agent(TUNABLE_AGENT, cls='Tunable')}"
    jitter = ("--agent-opt", "jitter=true", "--seeds=3")
    bench(agent, "--agent-opt", "lr=0.05", "--agent-opt", "epochs=5", *jitter, "--fmlbench-out=old", "toy_task") \
        .assert_outcomes(passed=3)
    bench(agent, *GOOD, *jitter, "--fmlbench-out=new", "toy_task").assert_outcomes(passed=3)
    out = fmlbench(pytester, "compare", "old", "new", "--json", "cmp.json", "--width", "250")
    assert out.ret == 0, out.stderr.str()
    (row,) = json.loads((pytester.path / "cmp.json").read_text())["tasks"]
    assert row["paired_seeds"] == 3 and row["old_seeds"] == "0 1 2"
    assert row["ni_old_sem"] is not None and row["ni_delta_sem"] is not None and row["test_delta_sem"] is not None
    assert row["ni_p"] is not None and 0 <= row["ni_p"] <= 1
    assert row["ni_verdict"].startswith(("exceeds noise (p=", "within noise (p="))
    assert (row["ni_p"] < 0.05) == row["ni_verdict"].startswith("exceeds")
    out.stdout.fnmatch_lines(["*toy_task*3 paired*±*±*"])
    # the same folder against itself: no change on any seed
    same = fmlbench(pytester, "compare", "new", "new", "--json", "same.json")
    (row,) = json.loads((pytester.path / "same.json").read_text())["tasks"]
    assert row["ni_delta"] == 0 and row["ni_verdict"] == "no change"


def test_one_agent_against_another_and_tasks_on_one_side_only(pytester, toy, bench):
    import shutil

    import yaml

    other = pytester.path / "other_task"
    shutil.copytree(toy, other)
    spec = yaml.safe_load((other / "task.yaml").read_text())
    (other / "task.yaml").write_text(yaml.safe_dump({**spec, "id": "other_task"}, sort_keys=False))
    bench("--agent=baseline", "--fmlbench-out=old", "toy_task", "other_task").assert_outcomes(passed=2)
    bench("--agent=random-search", "--steps=2", "--fmlbench-out=new", "toy_task").assert_outcomes(passed=1)
    out = fmlbench(pytester, "compare", "old", "new", "--csv", "cmp.csv", "--width", "250")
    assert out.ret == 0, out.stderr.str()
    out.stdout.fnmatch_lines(["*baseline/- -> random-search/-*toy_task*", "only in OLD (old): other_task (*",
                              "matched on task (one agent/model a side, different ones)*"])
    rows = list(csv.DictReader((pytester.path / "cmp.csv").open()))
    assert [(r["task"], r["only_in"]) for r in rows] == [("toy_task", ""), ("other_task", "old")]


def test_bad_input_is_one_clear_line(pytester, toy, bench):
    (pytester.path / "empty").mkdir()
    for args, message in (
        (("--fmlbench-compare=empty",), "ERROR: --fmlbench-compare: no run records (record.json) or original results "
                                        "(summary.json) under */empty"),
        (("--fmlbench-compare=last",), "ERROR: --fmlbench-compare: no saved session 'last' in */sessions (none saved yet)"),
        (("--fmlbench-compare=nightly",), "ERROR: --fmlbench-compare: unknown saved session 'nightly' in */sessions*"),
        (("--fmlbench-compare=empty", "--fmlbench-fail-on-regression=-0.1"),
         "ERROR: --fmlbench-fail-on-regression must be 0 or more (a drop of NI or signed improvement), got -0.1"),
        (("--fmlbench-fail-on-regression=0.05",), "ERROR: --fmlbench-fail-on-regression needs --fmlbench-compare=*"),
    ):
        result = bench("--agent=baseline", *args, "toy_task")
        assert result.ret == 4, (args, result.stdout.str())
        result.stderr.fnmatch_lines([message])
        assert "Traceback" not in result.stderr.str() and len(result.stderr.lines) <= 2, result.stderr.str()
    # nothing ran, nothing was saved
    assert not (pytester.path / "reports").exists()

    for args, message in ((("empty", "empty"), "fmlbench: no run records (record.json) or original results*"),
                          (("last", "empty"), "fmlbench: no saved session 'last' in reports/fmlbench/sessions*"),
                          (("empty", "empty", "--fail-on-regression", "-1"), "fmlbench: --fail-on-regression must be*")):
        out = fmlbench(pytester, "compare", *args)
        assert out.ret == 2 and out.stderr.lines[0:1] and len(out.stderr.lines) == 1, out.stderr.str()
        out.stderr.fnmatch_lines([message])


def test_sessions_sharing_an_output_folder_take_distinct_numbers(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    from pytest_fmlbench.compare import sessions

    def save(i):
        return sessions.save(tmp_path, [], commit="abc", args=[str(i)], exitstatus=0).name

    with ThreadPoolExecutor(8) as pool:
        names = list(pool.map(save, range(16)))
    assert sorted(int(n[:4]) for n in names) == list(range(1, 17))
    assert sessions.resolve("last", tmp_path).name.startswith("0016_")
    assert sessions.resolve("last-15", tmp_path).name.startswith("0001_")
    assert sessions.resolve("7", tmp_path).name.startswith("0007_")


def side(label, rows):
    from pytest_fmlbench.compare import Side

    base = {"agent": "a", "model": "-", "metric": "accuracy", "direction": "higher", "transform": "none",
            "baseline_test": 0.5, "ni_val": 0.0, "note": "ok"}
    return Side.from_rows(label, [{**base, "task": task, "seed": seed, "ni": ni, "raw_test": 0.5 + ni}
                                  for task, seed, ni in rows])


def test_noise_rules_paired_welch_and_deterministic():
    from scipy import stats

    from pytest_fmlbench.compare import compare

    old = side("old", [("t", 0, 0.10), ("t", 1, 0.20), ("t", 2, 0.15), ("u", 0, 0.3), ("u", 1, 0.3),
                       ("w", 5, 0.10), ("w", 6, 0.12), ("v", 0, float("nan"))])
    new = side("new", [("t", 0, 0.11), ("t", 1, 0.19), ("t", 2, 0.17), ("u", 0, 0.2), ("u", 1, 0.2),
                       ("w", 7, 0.5), ("w", 8, 0.52), ("v", 0, 0.2)])
    result = {t.task: t for t in compare(old, new).tasks}
    t = result["t"]  # paired by seed: a small change, noisy
    assert t.paired == 3 and abs(t.ni.delta - 0.02 / 3) < 1e-12
    assert abs(t.ni.p - stats.ttest_rel([0.11, 0.19, 0.17], [0.10, 0.20, 0.15]).pvalue) < 1e-12
    assert t.ni.verdict.startswith("within noise") and t.ni.sem > 0
    u = result["u"]  # the same drop on every seed: no noise to beat
    assert u.ni.verdict == "exceeds noise (same on every seed)" and abs(u.drop() - 0.1) < 1e-12
    w = result["w"]  # no seed on both sides: Welch over the sides' values
    assert w.paired == 0 and abs(w.ni.p - stats.ttest_ind([0.5, 0.52], [0.10, 0.12], equal_var=False).pvalue) < 1e-12
    assert w.ni.verdict.startswith("exceeds noise") and abs(w.ni.delta - 0.4) < 1e-12
    assert result["v"].ni.verdict == "n/a (no value on one side)" and len(compare(old, new).regressions(0.05)) == 1


def test_original_fmlbench_results_folders_compare_like_ours(tmp_path, capsys):
    from pytest_fmlbench.cli import main
    from scoring.test_original import final_test, summary, write

    for side_name, test_acc in (("old", 0.65), ("new", 0.60)):
        run = tmp_path / side_name / "aide" / "Privacy_opacus" / "20250101_000000"
        write(run / "summary.json", summary(steps=[0.60, 0.62], best=0.62))
        final_test(run, "20250101_000000", {"cifar10_dp": {"means": {"test_acc_mean": test_acc}}})
    assert main(["compare", str(tmp_path / "old"), str(tmp_path / "new"), "--fail-on-regression", "0.03",
                 "--json", str(tmp_path / "cmp.json")]) == 1
    out = capsys.readouterr().out
    (row,) = json.loads((tmp_path / "cmp.json").read_text())["tasks"]
    assert row["task"] == "Privacy_opacus" and row["solver"] == "aide/gpt-5"
    assert abs(row["test_delta"] + 0.05) < 1e-9 and abs(row["ni_delta"] + 0.05) < 1e-9  # NI bounds (1, 0)
    assert ("regression: Privacy_opacus (aide/gpt-5): signed improvement fell by 0.05 (0.0623 -> 0.0123, no seeds: "
            "noise unknown); NI fell by 0.05 (0.0623 -> 0.0123, no seeds: noise unknown)") in out


# the original's declared baselines of a lower-is-better and a higher-is-better task, both normalised by D = 1
FAIRLEARN = ("Fairness_fairlearn", "adult", "abs_demographic_parity_diff_mean", 0.18663158848996153, 0.1730295772151227)
OPACUS = ("Privacy_opacus", "cifar10_dp", "test_acc_mean", 0.5893848545414169, 0.5877142857142857)


def original_side(folder, tests):
    """An original FML-bench results folder: aide on each (task, ..., baseline val, baseline test) with a valid
    step at the baseline's validation value and the given final test value."""
    from scoring.test_original import final_test, summary, write

    for (task, dataset, metric, base_val, _), test in tests:
        run = folder / "aide" / task / "20250101_000000"
        write(run / "summary.json", summary(steps=[base_val], best=base_val, baseline=base_val))
        final_test(run, "20250101_000000", {dataset: {"means": {metric: test}}})
    return str(folder)


def test_a_run_worse_than_the_baseline_trips_the_gate_naming_the_measure(tmp_path, capsys):
    from pytest_fmlbench.cli import main

    at_baseline = original_side(tmp_path / "old", [(FAIRLEARN, FAIRLEARN[4]), (OPACUS, OPACUS[4])])
    # worse than the baseline: the fairness gap grew by 0.054 (lower is better), the accuracy fell by 0.05
    worse = original_side(tmp_path / "worse", [(FAIRLEARN, FAIRLEARN[4] + 0.054), (OPACUS, OPACUS[4] - 0.05)])
    assert main(["compare", at_baseline, worse, "--fail-on-regression", "0.03", "--json", str(tmp_path / "w.json"),
                 "--width", "250"]) == 1
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if line.startswith("regression:")]
    assert lines == [
        "regression: Fairness_fairlearn (aide/gpt-5): signed improvement fell by 0.054 (0 -> -0.054, no seeds: noise "
        "unknown); NI 0 -> 0 (drop 0)",
        "regression: Privacy_opacus (aide/gpt-5): signed improvement fell by 0.05 (0 -> -0.05, no seeds: noise "
        "unknown); NI 0 -> 0 (drop 0)"], out
    assert "FAILED: 2 task(s) lost more than 0.03 in signed improvement or NI against " in out
    assert "NI is clamped at 0" in out and "REGRESSION: signed improvement" in out
    rows = {row["task"]: row for row in json.loads((tmp_path / "w.json").read_text())["tasks"]}
    assert rows["Fairness_fairlearn"]["signed_delta"] == pytest.approx(-0.054)
    assert rows["Privacy_opacus"]["signed_new"] == pytest.approx(-0.05) and rows["Privacy_opacus"]["ni_delta"] == 0

    better = original_side(tmp_path / "better", [(FAIRLEARN, FAIRLEARN[4] - 0.05), (OPACUS, OPACUS[4] + 0.05)])
    for old, new in ((at_baseline, better), (at_baseline, at_baseline), (worse, worse), (worse, at_baseline)):
        assert main(["compare", old, new, "--fail-on-regression", "0.03"]) == 0, (old, new)
        out = capsys.readouterr().out
        assert "regression:" not in out and "no task lost more than 0.03 in signed improvement or NI" in out


def test_the_pytest_gate_sees_a_session_fall_below_the_baseline(pytester, toy, bench, write_agent):
    agent = f"--agent={write_agent(TUNABLE_AGENT, cls='Tunable')}"
    bench(agent, *BAD, "toy_task").assert_outcomes(passed=1)
    (saved,) = sessions_of(pytester.path)
    session = json.loads(saved.read_text())
    scores = session["runs"][0]["scores"]
    assert scores["raw_test"] < scores["baseline_test"] and scores["ni"] == 0  # below the baseline, clamped
    # the same run as it would have scored at the baseline: NI 0 too
    scores.update(raw_test=scores["baseline_test"], ni=0.0)
    at_baseline = pytester.path / "at_baseline.json"
    at_baseline.write_text(json.dumps(session))

    result = bench(agent, *BAD, f"--fmlbench-compare={at_baseline}", "--fmlbench-fail-on-regression=0.002", "toy_task")
    assert result.ret == 1, result.stdout.str()
    result.stdout.fnmatch_lines(["regression: toy_task (tunable/-): signed improvement fell by * (0 -> -*, no seeds: "
                                 "noise unknown); NI 0 -> 0 (drop 0)",
                                 "FAILED: 1 task(s) lost more than 0.002 in signed improvement or NI against *"])


def test_the_signed_improvement_unclamped_with_its_power_and_a_scale_from_the_other_side():
    from scipy import stats

    from pytest_fmlbench.compare import compare

    def rows(signed, scale=0.5):
        # lower is better, D = 0.5: test = baseline - signed * D
        return [{"agent": "a", "model": "-", "task": "t", "seed": seed, "metric": "gap", "direction": "lower",
                 "transform": "none", "baseline_test": 0.2, "raw_test": 0.2 - s * 0.5, "ni": max(s, 0.0),
                 "ni_val": 0.0, "note": "ok", "ni_scale": scale} for seed, s in enumerate(signed)]

    from pytest_fmlbench.compare import Side

    old, new = Side.from_rows("old", rows([0.0, 0.1, 0.05])), Side.from_rows("new", rows([-0.3, -0.1, -0.2]))
    (t,) = compare(old, new).tasks
    assert t.ni.delta == pytest.approx(-0.05) and t.signed.delta == pytest.approx(-0.25)
    # NI fell by 0.05 too, but not beyond its noise (per seed 0, -0.1, -0.05): only the signed improvement trips
    assert t.tripped(0.1) == ["signed improvement"] and t.tripped(0.01) == ["signed improvement"]
    assert t.ni.within_noise and t.gate(0.01) == ("regression", "signed improvement")
    d = [-0.3, -0.2, -0.25]
    sem = stats.sem(d)
    # the smallest drop found with 80% power: the noncentral t's upper tail past the two-sided critical value
    crit = stats.t.ppf(0.975, 2)
    assert stats.nct.sf(crit, 2, t.signed.detectable / sem) == pytest.approx(0.8)
    assert t.signed.p == pytest.approx(t.test.p)  # the same D on both sides: the test value's t-test

    # a session saved before D was kept: it borrows the other side's D for the same task and baseline
    (t,) = compare(Side.from_rows("old", rows([0.0, 0.1, 0.05], scale=None)), new).tasks
    assert t.signed.delta == pytest.approx(-0.25)
    (t,) = compare(Side.from_rows("old", rows([0.0], scale=None)), Side.from_rows("new", rows([0.0], scale=None))).tasks
    assert t.signed.verdict == "n/a (no value on one side)" and t.tripped(0) == []

    # a smoke run has no NI against the declared baselines, so no signed improvement either: it cannot trip
    smoke = [{**row, "ni": float("nan"), "note": "smoke: a check of the code path, not a result"}
             for row in rows([-0.3, -0.1, -0.2])]
    (t,) = compare(old, Side.from_rows("new", smoke)).tasks
    assert t.tripped(0) == []


def test_a_run_the_infrastructure_failed_is_left_out_of_a_comparison(tmp_path, capsys):
    """A lost node's run (failure_cause infra) is not the agent's score: it neither drags a side's NI down nor
    trips the gate; it is named as left out."""
    from scoring.records import write_run

    from pytest_fmlbench.cli import main

    write_run(tmp_path / "old" / "runs", [(0.7, {})], seed=0, test_metric=0.7)
    write_run(tmp_path / "old" / "runs", [(0.7, {})], seed=1, test_metric=0.7)
    write_run(tmp_path / "new" / "runs", [(0.7, {})], seed=0, test_metric=0.7)
    # seed 1's job was lost with its node: the run fell back to the baseline's code, its test at the baseline's
    write_run(tmp_path / "new" / "runs", [(0.7, {})], seed=1, test_metric=0.6, status="error",
              failure_cause="infra", error="Slurm job 812_1 is NODE_FAIL without a result")
    assert main(["compare", str(tmp_path / "old" / "runs"), str(tmp_path / "new" / "runs"),
                 "--fail-on-regression", "0.05", "--json", str(tmp_path / "cmp.json")]) == 0
    captured = capsys.readouterr()
    assert "left out" in captured.err and "infrastructure failed it" in captured.err
    (row,) = json.loads((tmp_path / "cmp.json").read_text())["tasks"]
    assert abs(row["test_delta"]) < 1e-9, row
