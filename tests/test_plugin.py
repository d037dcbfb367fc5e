"""The plugin as users drive it: collection, selection, agents, JUnit properties, tables, xdist."""

import json
import shutil
import sys
import xml.etree.ElementTree as ET

from pathlib import Path

import pytest

from conftest import REPO, junit_props, load_record

REQUIRED_PROPERTIES = {
    "task", "agent", "model", "provider", "seed", "steps", "baseline_val", "baseline_test", "best_val",
    "test_metric", "normalized_improvement", "valid_step_ratio", "tokens_total", "cost_usd", "wall_clock_s",
    "integrity",
}


def junit_cases(path):
    root = ET.parse(path).getroot()
    return {case.get("name"): (case, junit_props(path, case.get("name"))) for case in root.iter("testcase")}


def test_collect_one_item_per_task_and_seed(pytester, toy, bench):
    result = bench("--collect-only", "-q", "--agent=baseline", "--seeds=2", "toy_task")
    result.stdout.fnmatch_lines(["toy_task::toy_task[[]seed0]", "toy_task::toy_task[[]seed1]", "*2 tests collected*"])


@pytest.mark.parametrize("selector", [["-k", "toy"], ["-m", "small"], ["-m", "toy"]])
def test_selection_by_keyword_and_markers(pytester, toy, bench, selector):
    result = bench("--collect-only", "-q", "--strict-markers", "--agent=baseline", *selector, "toy_task")
    result.stdout.fnmatch_lines(["toy_task::toy_task[[]seed0]"])
    assert bench("--collect-only", "-q", "--agent=baseline", "-m", "privacy", "toy_task").ret == 5


@pytest.mark.parametrize("selection, collected", [
    ([], ["privacy_opacus[seed0]"]),
    (["-k", "privacy"], ["privacy_opacus[seed0]"]),
    (["-m", "small"], ["privacy_opacus[seed0]"]),
    (["-m", "full"], ["privacy_opacus_full[seed0]"]),
    (["-m", "lite"], ["privacy_opacus[seed0]", "privacy_opacus_full[seed0]"]),
    (["-k", "privacy_opacus_full"], ["privacy_opacus_full[seed0]"]),
    (["task_suites/privacy_opacus/full"], ["privacy_opacus_full[seed0]"]),
])
def test_full_profile_tasks_run_only_when_chosen(pytester, bench, selection, collected):
    # a full twin needs its data and a GPU: `pytest --agent=aide -k privacy` must not error on a laptop
    shutil.copytree(REPO / "task_suites" / "privacy_opacus", pytester.path / "task_suites" / "privacy_opacus",
                    ignore=shutil.ignore_patterns("__pycache__"))
    paths = [arg for arg in selection if arg.startswith("task_suites")] or ["task_suites"]
    options = [arg for arg in selection if not arg.startswith("task_suites")]
    result = bench("--collect-only", "-q", "--agent=baseline", *options, *paths)
    listed = sorted(line.rsplit("::", 1)[1] for line in result.stdout.lines if "::" in line)
    assert listed == collected, result.stdout.str()


def test_without_agent_items_are_skipped_with_a_reason(pytester, toy, bench):
    result = bench("-rs", "toy_task")
    result.stdout.fnmatch_lines(["*SKIPPED*no --agent given: benchmark tasks run only with --agent=NAME*"])
    result.assert_outcomes(skipped=1)


def test_baseline_run_records_properties_and_tables(pytester, toy, bench, real_encoder):
    result = bench("--agent=baseline", "--junitxml=out.xml", "toy_task")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*Raw Performance*baseline*", "*Normalized Improvement*", "*Process-Level metrics*"])
    case, props = junit_cases(pytester.path / "out.xml")["toy_task[seed0]"]
    assert REQUIRED_PROPERTIES <= set(props)
    assert props["agent"] == "baseline" and props["integrity"] == "ok" and props["steps"] == "1"
    assert props["tokens_total"] == "0" and props["model"] == "none"
    assert 0.5 < float(props["test_metric"]) <= 1.0
    record = load_record(pytester.path)
    assert record["status"] == "finished" and record["steps_used"] == 1 and record["final_val"] is not None
    csv_dir = pytester.path / "reports" / "fmlbench" / "reports" / "baseline__-"
    # the exploration metrics of a user's session, with the encoder it picks (GraphCodeBERT where its weights are)
    import pandas as pd

    process = pd.read_csv(csv_dir / "process_metrics.csv", index_col="task")
    assert process.loc["toy_task", "encoder"] in ("all-minilm-l6-v2", "graphcodebert-base")
    assert process.loc["toy_task", "Exploration Spread"] == 0 and process.loc["toy_task", "Exploration Uniqueness"] == 1
    # compute beside the score: the machine, and the time and CPU time of its steps and final test
    from pytest_fmlbench.reports.disclosure import _cpu_model

    assert record["hardware"]["cpu_model"] == _cpu_model() and record["hardware"]["gpus"] == []
    steps = [json.loads(line) for line in (Path(props["fmlbench_run_dir"]) / "steps.jsonl").read_text().splitlines()]
    assert all(step["cpu_s"] > 0 for step in steps), steps
    assert record["final_test_s"] > 0 and 0 < record["final_test_cpu_s"]


def test_random_search_under_xdist_with_junit(pytester, toy, bench):
    result = bench("--agent=random-search", "--steps=3", "--seeds=2", "-n", "2", "--junitxml=out.xml", "toy_task")
    result.assert_outcomes(passed=2)
    cases = junit_cases(pytester.path / "out.xml")
    assert set(cases) == {"toy_task[seed0]", "toy_task[seed1]"}
    for _, props in cases.values():
        assert REQUIRED_PROPERTIES <= set(props)
        assert props["steps"] == "3" and props["agent"] == "random-search"
    assert cases["toy_task[seed0]"][1]["seed"] == "0" and cases["toy_task[seed1]"][1]["seed"] == "1"
    result.stdout.fnmatch_lines(["*toy_task*±*"])  # mean ± SEM over the two seeds


def test_agent_options_are_typed_and_unknown_ones_rejected(pytester, toy, bench):
    result = bench("--agent=random-search", "--agent-opt", "bogus=1", "toy_task")
    result.stderr.fnmatch_lines(["ERROR: agent random-search has no option bogus; options: include_baseline"])
    result = bench("--agent=random-search", "--agent-opt", "include_baseline=maybe", "toy_task")
    result.stderr.fnmatch_lines(["ERROR: --agent-opt include_baseline: Input should be a valid boolean*"])
    result = bench("--agent=random-search", "--agent-opt", "include_baseline=false", "--steps=2", "toy_task")
    result.assert_outcomes(passed=1)
    record = load_record(pytester.path)
    assert record["agent_options"] == {"include_baseline": False}


def test_unknown_agent_is_one_line(pytester, toy, bench):
    result = bench("--agent=nope", "toy_task")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["ERROR: unknown agent 'nope'; built-in agents: *aide*baseline*random-search*"])
    assert "Traceback" not in result.stderr.str()


CUSTOM_AGENT = """
    import json

    from pytest_fmlbench import Agent, AgentOptions, WholeFile

    class Options(AgentOptions):
        epochs: int = 100

    class MyAgent(Agent):
        name = "more-epochs"
        Options = Options

        def run(self, session):
            config = {"lr": 0.5, "epochs": self.options.epochs}
            edit = session.edit([WholeFile("config.json", json.dumps(config))])
            result = session.run_step("improve", plan="train longer", edit=edit)
            assert result.success, result.error
"""


def test_custom_agent_from_a_file(pytester, toy, bench, write_agent):
    spec = write_agent(CUSTOM_AGENT)
    result = bench(f"--agent={spec}", "--agent-opt", "epochs=150", "--junitxml=out.xml", "toy_task")
    result.assert_outcomes(passed=1)
    record = load_record(pytester.path)
    assert record["agent"] == "more-epochs" and record["agent_options"] == {"epochs": 150}
    steps = (next((pytester.path / "reports" / "fmlbench" / "runs" / "toy_task").iterdir()) / "steps.jsonl")
    step = json.loads(steps.read_text().splitlines()[0])
    assert step["action"] == "improve" and step["success"] and step["metric"] > 0.76


def test_custom_agent_from_a_module(pytester, toy, bench, write_agent):
    write_agent(CUSTOM_AGENT, name="team_agents.py")
    result = bench("--agent=team_agents:MyAgent", "--fmlbench-out=elsewhere/bench", "toy_task")
    result.assert_outcomes(passed=1)
    assert not (pytester.path / "reports").exists()
    records = list((pytester.path / "elsewhere" / "bench" / "runs" / "toy_task").glob("*/record.json"))
    assert len(records) == 1 and json.loads(records[0].read_text())["best_val"] > 0.76
    assert (pytester.path / "elsewhere" / "bench" / "reports" / "more-epochs__-" / "runs.csv").is_file()


def test_agent_crash_is_an_error_with_one_line_and_a_record(pytester, toy, bench, write_agent):
    spec = write_agent("""
        from pytest_fmlbench import Agent

        class MyAgent(Agent):
            def run(self, session):
                session.run_step("baseline")
                raise RuntimeError("policy bug")
    """)
    result = bench(f"--agent={spec}", "toy_task")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*toy_task: agent MyAgent crashed: RuntimeError: policy bug*"])
    record = load_record(pytester.path)
    assert record["status"] == "error" and "policy bug" in record["error"] and record["steps_used"] == 1


def test_fmlbench_score_recomputes_tables(pytester, toy, bench):
    bench("--agent=baseline", "toy_task").assert_outcomes(passed=1)
    result = pytester.run(Path(sys.executable).parent / "fmlbench", "score", str(pytester.path / "reports" / "fmlbench" / "runs"))
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*Raw Performance*", "*toy_task*", "*Normalized Improvement*", "*Process-Level*"])


def test_benchmark_items_run_longest_first_with_work_stealing(pytester, toy, bench):
    import yaml

    for name, expected in (("short_task", 5), ("long_task", 500)):
        copy = pytester.path / name
        shutil.copytree(toy, copy)
        spec = yaml.safe_load((copy / "task.yaml").read_text())
        spec.update(id=name, expected_duration_s=expected)
        (copy / "task.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    result = bench("--collect-only", "-q", "--agent=baseline", "short_task", "toy_task", "long_task")
    order = [line.split("::")[-1] for line in result.stdout.lines if "::" in line]
    # declared durations first (longest first), the undeclared toy task at the median
    assert order == ["long_task[seed0]", "toy_task[seed0]", "short_task[seed0]"], order
    result = bench("--agent=baseline", "-n", "2", "-v", "short_task", "long_task")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*scheduling tests via WorkStealingScheduling*"])


def test_live_progress_prints_one_line_per_finished_step_and_q_keeps_it_quiet(pytester, toy, bench):
    result = bench("--agent=random-search", "--steps=2", "-n", "2", "toy_task")
    result.assert_outcomes(passed=1)
    lines = [line for line in result.stdout.lines if line.startswith("[fmlbench]")]
    assert len(lines) == 2, lines
    assert lines[0].startswith("[fmlbench] toy_task[seed0] step 1/2 baseline -> 0.76; best 0.76 (+0.000), failed 0")
    assert lines[1].startswith("[fmlbench] toy_task[seed0] step 2/2 random -> ")
    quiet = bench("--agent=random-search", "--steps=2", "--fresh", "-q", "toy_task")
    quiet.assert_outcomes(passed=1)
    assert not [line for line in quiet.stdout.lines if line.startswith("[fmlbench]")]


def test_a_live_line_starts_a_line_of_its_own_after_xdist_progress_letters(pytester):
    """Under -n, pytest writes each item's letter and the final "[100%]" without opening a line of its own
    (ensure_newline() does nothing then): a live line written at that moment was glued to them."""
    import io

    from _pytest.terminal import TerminalReporter

    from pytest_fmlbench.terminal_lines import line_writer

    out = io.StringIO()
    reporter = TerminalReporter(pytester.parseconfig(), out)
    write = line_writer(reporter)
    reporter._tw.write(".")
    reporter._tw.write("  [100%]")
    write("[fmlbench] toy_task[seed0] step 2/2 random -> 0.76")
    write("[fmlbench] toy_task[seed1] step 1/2 baseline -> 0.76")
    assert out.getvalue().splitlines() == [".  [100%]", "[fmlbench] toy_task[seed0] step 2/2 random -> 0.76",
                                           "[fmlbench] toy_task[seed1] step 1/2 baseline -> 0.76"]


def test_live_progress_shows_every_step_when_items_run_in_the_controller(pytester, toy, bench):
    # no -n: the item runs under pytest's output capture in the very process that shows the progress; a
    # line written then from the display's thread landed in the item's captured output and was lost
    result = bench("--agent=random-search", "--steps=3", "toy_task")
    result.assert_outcomes(passed=1)
    lines = [line for line in result.stdout.lines if line.startswith("[fmlbench]")]
    assert [line.split(" -> ")[0] for line in lines] == [
        "[fmlbench] toy_task[seed0] step 1/3 baseline", "[fmlbench] toy_task[seed0] step 2/3 random",
        "[fmlbench] toy_task[seed0] step 3/3 random"], result.stdout.str()


def test_live_display_held_back_loses_no_line(tmp_path):
    """While an item runs under capture here, the display's thread writes nothing and marks nothing as shown;
    what came meanwhile is shown at the next moment capture is off."""
    import json
    import time

    from pytest_fmlbench.progress import JOBS_DIR, LIVE_DIR, POLL_S, LiveDisplay, LiveFile

    written: list[str] = []
    display = LiveDisplay(tmp_path, written.append, tty=False)
    display.start()
    try:
        with display.held_back():
            LiveFile(tmp_path, "run0", "toy[seed0]", 2, 0.5, "higher", 1.0).update(
                step=1, done=1, best_val=0.5, last={"success": True, "metric": 0.5, "action": "baseline"})
            (tmp_path / LIVE_DIR / JOBS_DIR).mkdir(parents=True, exist_ok=True)
            (tmp_path / LIVE_DIR / JOBS_DIR / "run0.json").write_text(
                json.dumps({"item": "toy[seed0]", "job_id": "7", "state": "done", "steps_total": 2}))
            time.sleep(4 * POLL_S)  # the thread polls several times meanwhile
            assert written == []
        display.pump()
    finally:
        display.stop()
    assert [line.split(" -> ")[0] for line in written] == [
        "[fmlbench] toy[seed0] slurm job 7: done", "[fmlbench] toy[seed0] step 1/2 baseline"], written


# a Ctrl-C that lands in a hook of the session's end, as one pressed there does
CTRL_C_AT = '''
import os, signal, time
import pytest

@pytest.hookimpl(tryfirst=True)
def {hook}(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(30)
'''


@pytest.mark.parametrize("hook, args", [("pytest_terminal_summary", ()), ("pytest_sessionfinish", ("-n", "2"))])
def test_ctrl_c_while_the_session_ends_is_one_line_and_loses_no_run(pytester, toy, bench, hook, args):
    """After the last item pytest no longer turns a Ctrl-C into its interrupted report: pressed while the
    tables were scored (seen: importing torch for the exploration metrics) it ended Python with a
    traceback of some 90 lines and a death by SIGINT."""
    (pytester.path / "conftest.py").write_text(CTRL_C_AT.format(hook=hook))
    result = bench("--agent=baseline", *args, "toy_task")
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.INTERRUPTED, out
    assert "Traceback (most recent call last)" not in out, out
    runs = pytester.path / "reports" / "fmlbench" / "runs"
    lines = [line for line in out.splitlines() if line.startswith("[fmlbench] Ctrl-C")]
    assert lines == [f"[fmlbench] Ctrl-C while the session ended: its summary was cut short; every run is recorded "
                     f"under {runs}/ (the same command prints the tables from them again, so does "
                     f"`fmlbench score {runs}`)"], out
    result.stdout.fnmatch_lines(["*KeyboardInterrupt*"])
    assert load_record(pytester.path)["status"] == "finished"
    (pytester.path / "conftest.py").unlink()
    again = bench("--agent=baseline", "toy_task")
    again.assert_outcomes(passed=1)
    again.stdout.fnmatch_lines(["*reused 1 finished run(s)*", "*Raw Performance*", "*Process-Level metrics*"])


# the same press, landing in code a C extension runs through PyRun_String (as pybind11's exec does in optree's
# module init, imported with transformers for the exploration metrics)
CTRL_C_IN_EMBEDDED_CODE_AT = '''
import ctypes, os, signal, time
import pytest

run_string = ctypes.pythonapi.PyRun_String
run_string.restype = ctypes.py_object
run_string.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.py_object, ctypes.py_object]

@pytest.hookimpl(tryfirst=True)
def {hook}(*args, **kwargs):
    scope = {{"os": os, "signal": signal, "time": time}}
    run_string(b"os.kill(os.getpid(), signal.SIGINT)\\ntime.sleep(30)\\n", 257, scope, scope)  # 257: a module's code
'''


@pytest.mark.parametrize("hook", ["pytest_runtest_call", "pytest_terminal_summary"])
def test_a_handled_ctrl_c_ends_with_status_2_also_where_it_left_a_c_extensions_code(pytester, toy, bench, hook):
    """CPython marks a KeyboardInterrupt that leaves code run through PyRun_String as unhandled, even where it
    is caught further out, and `python -m pytest` then ended by killing itself with SIGINT after pytest
    printed its interrupted report: exit -2 (a shell's 130) in 3 of 8 presses at the session's end. The
    report names where the press landed (it named the plugin's signal handler)."""
    (pytester.path / "conftest.py").write_text(CTRL_C_IN_EMBEDDED_CODE_AT.format(hook=hook))
    result = bench("--agent=baseline", "toy_task")
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.INTERRUPTED, out
    assert "Traceback (most recent call last)" not in out, out
    assert [line for line in out.splitlines() if line.endswith(": KeyboardInterrupt")] == ["<string>:1: KeyboardInterrupt"], out


def test_ctrl_c_once_the_session_has_ended_is_dropped(pytester, toy, bench):
    """In pytest's clean-up (unconfigure) nothing is left to stop: a press there ended in a traceback of
    pytest's unconfigure and a death by SIGINT, whatever the session's result."""
    (pytester.path / "conftest.py").write_text(CTRL_C_AT.format(hook="pytest_unconfigure").replace("time.sleep(30)",
                                                                                                "time.sleep(0.5)"))
    result = bench("--agent=baseline", "toy_task")
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.OK and "Traceback (most recent call last)" not in out, out
    result.stdout.fnmatch_lines(["*Raw Performance*", "*1 passed*"])


def test_pytest_main_called_by_a_program_gives_its_ctrl_c_back(pytester, toy):
    """The controller takes SIGINT for its session (and drops later presses once it ended); a script or a
    notebook that called pytest.main() goes on, and its Ctrl-C must work again afterwards."""
    (pytester.path / "driver.py").write_text(
        "import signal, sys, pytest\n"
        "signal.signal(signal.SIGINT, signal.default_int_handler)  # whatever this test's runner was given\n"
        "code = pytest.main(['-p', 'no:cacheprovider', '-q', 'toy_task', '--agent=baseline'])\n"
        "print('DRIVER', int(code), signal.getsignal(signal.SIGINT) is signal.default_int_handler)\n")
    result = pytester.run(sys.executable, "driver.py")
    result.stdout.fnmatch_lines(["DRIVER 0 True"])
