"""The agent under test is untrusted too: its own Python runs in a sandboxed process behind the protocol.

Every attack is a user agent (the bring-your-own-agent interface) run in the default mode. It patches
harness modules in its own process, reads the harness, private data, records and keys, writes records,
signals and traces the harness, opens sockets, forges what the protocol takes, or ends badly (hangs,
floods, forks, eats memory, breaks the protocol). Each must leave the score honest, or fail its item
with one line, and leave no secret in any file.
"""

import json
import os
import shutil
import socket
import time
from pathlib import Path

import pytest
import yaml

from agent_attacks import COMBINED, MODULE_PATCH, agent_source, ending_source, fill, payload
from conftest import REPO, junit_props, load_record
from llm.fixtures import api_keys, fake_llm, kill_at_call, llm_settings  # noqa: F401 (fixtures)
from llm.toy_coder import ToyCoder

from pytest_fmlbench.agentkit import agents_dir, load_agent_class
from pytest_fmlbench.llm import make_llm_factory
from pytest_fmlbench.runner import RunError, RunSettings, execute
from pytest_fmlbench.spec import load_task

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")

SECRET_KEY = "sk-SECRET-agent-must-not-see-0123456789"
TOY_TEST = 0.72  # the toy baseline's score on the hidden split


@pytest.fixture
def listener():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(0.2)
    yield server
    server.close()


@pytest.fixture
def secrets(monkeypatch, tmp_path):
    """Keys the harness holds: an LLM key, a key under a name no denylist knows, a credential in $HOME."""
    home = tmp_path / "home"
    home.mkdir()
    (home / ".netrc").write_text("machine example.org login me password SECRET-netrc\n")
    monkeypatch.setenv("OPENAI_API_KEY", SECRET_KEY)
    monkeypatch.setenv("WAREHOUSE_URL", "postgres://me:SECRET-db@db/warehouse")
    monkeypatch.setenv("HOME", str(home))
    return home


def _run_dir(project: Path, task: str) -> Path:
    (run,) = (project / "reports" / "fmlbench" / "runs" / task).iterdir()
    return run


def _agent_log(project: Path, task: str) -> str:
    return "\n".join(p.read_text(errors="replace") for p in sorted((_run_dir(project, task) / "logs").glob("agent*.log")))


def _steps(project: Path, task: str) -> list[dict]:
    return [json.loads(line) for line in (_run_dir(project, task) / "steps.jsonl").read_text().splitlines()]


def _no_secret_anywhere(project: Path) -> None:
    for path in (p for p in project.rglob("*") if p.is_file() and not p.is_symlink()):
        text = path.read_bytes()
        for secret in (SECRET_KEY.encode(), b"SECRET-netrc", b"SECRET-db"):
            assert secret not in text, path


def _accepted(server: socket.socket) -> bool:
    try:
        conn, _ = server.accept()
    except OSError:
        return False
    conn.close()
    return True


def _attack(pytester, bench, task_dir: Path, listener, home: Path, names=COMBINED, extra_args=()):
    values = {"HARNESS_FILE": task_dir / "harness" / "evaluate.py", "TASK_DIR": task_dir, "HOME_DIR": home,
              "RUNS_DIR": pytester.path / "reports" / "fmlbench" / "runs" / task_dir.name, "PORT": listener.getsockname()[1],
              "HARNESS_PID": os.getpid(), "PROJECT": pytester.path, "AGENTS_DIR": agents_dir()}
    (pytester.path / "attack_agent.py").write_text(agent_source(payload(names, **values), MODULE_PATCH))
    return bench("--agent=attack_agent.py:MyAgent", "--junitxml=out.xml", *extra_args, task_dir.name)


def _assert_contained(pytester, task: str, listener) -> tuple[dict, str]:
    """What every attack run shows: the payload ran, was refused everywhere, and touched nothing."""
    log = _agent_log(pytester.path, task)
    attacks = [line for line in log.splitlines() if line.startswith("ATTACK")]
    assert attacks, log[-3000:]
    for line in attacks:
        assert not any(word in line for word in ("FOUND", "WROTE", "KILLED", "ATTACHED", "CONNECTED", "crashed")), line
    assert "ATTACK environ: own environment clean" in log
    assert not _accepted(listener), "the agent reached a loopback listener"
    _no_secret_anywhere(pytester.path)
    record = load_record(pytester.path, task)
    assert record["agent_process"] == "bwrap" and record["sandbox"] == "bwrap"
    assert record["status"] == "finished" and record["integrity"] == "ok"
    return record, log


def _trusted_code() -> dict[Path, bytes]:
    """Code that the harness, its evaluators and later runs execute."""
    import pytest_fmlbench.evalkit as kit

    return {path: path.read_bytes() for path in (Path(kit.__file__), agents_dir() / "baseline.py")}


def _no_planted_hooks() -> None:
    import site
    import sysconfig

    for folder in {sysconfig.get_paths()["purelib"], *site.getsitepackages()}:
        assert not list(Path(folder).glob("zz_fmlbench_agent_attack*")), folder


def test_every_attack_at_once_on_the_toy_task(pytester, toy, bench, listener, secrets):
    harness_before = (toy / "harness" / "evaluate.py").read_bytes()
    trusted = _trusted_code()
    result = _attack(pytester, bench, toy, listener, secrets)
    result.assert_outcomes(passed=1)
    record, log = _assert_contained(pytester, "toy_task", listener)
    assert (toy / "harness" / "evaluate.py").read_bytes() == harness_before
    assert {path: path.read_bytes() for path in trusted} == trusted
    _no_planted_hooks()
    assert log.count("ATTACK package-write: refused") >= 4
    # the patches ran in the agent's process (at import and in run) and changed nothing out here
    assert "ATTACK patch-harness: patched at import" in log and "ATTACK patch-harness: patched in run" in log
    assert record["test_metric"] == pytest.approx(TOY_TEST) and record["best_val"] == pytest.approx(0.76)
    assert record["steps_used"] == 1
    (step,) = _steps(pytester.path, "toy_task")
    assert step["success"] and step["metric"] == pytest.approx(0.76) and step["is_best"]
    # what the agent sent is data: the forged fields sit in extra, its long analysis was cut
    assert step["extra"] == {"metric": 0.999, "is_best": True, "test_metric": 0.999, "success": True}
    assert len(step["analysis"]) < 101_000 and "characters cut" in step["analysis"]
    for refused in ("protected", "traversal", "absolute", "data", "parent", "annotate", "files_of", "huge extra",
                    "unknown op"):
        assert f"ATTACK protocol-forge: refused {refused}" in log, refused
    props = junit_props(pytester.path / "out.xml", "toy_task[seed0]")
    assert props["agent_process"] == "bwrap" and float(props["test_metric"]) == pytest.approx(TOY_TEST)


def test_every_attack_at_once_on_a_real_task(pytester, bench, listener, secrets):
    """fairness_fairlearn in the default mode: the score is the baseline's, nothing leaked or changed."""
    task_dir = pytester.path / "fairness_fairlearn"
    shutil.copytree(REPO / "task_suites" / "fairness_fairlearn", task_dir, ignore=shutil.ignore_patterns("__pycache__"))
    harness_before = {p: p.read_bytes() for p in (task_dir / "harness").rglob("*") if p.is_file()}
    result = _attack(pytester, bench, task_dir, listener, secrets)
    result.assert_outcomes(passed=1)
    record, _ = _assert_contained(pytester, "fairness_fairlearn", listener)
    assert {p: p.read_bytes() for p in harness_before} == harness_before
    spec = yaml.safe_load((task_dir / "task.yaml").read_text())
    assert record["test_metric"] == pytest.approx(spec["baseline"]["test"], abs=1e-9)
    assert record["best_val"] == pytest.approx(spec["baseline"]["val"], abs=1e-9)


def _limited(toy: Path, timeout_s: int = 60) -> None:
    spec = yaml.safe_load((toy / "task.yaml").read_text())
    spec["timeout_s"] = timeout_s
    (toy / "task.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))


@pytest.mark.parametrize("ending, options, message", [
    ("hang", ["--agent-timeout=8"], "exceeded its time budget of 8 s"),
    ("flood", [], "flooded its output (more than 64 MiB)"),
    ("fork-bomb", ["--agent-max-processes=40"], "hit a limit of its process: too many processes (its limit: 40 processes)"),
    ("memory", ["--agent-memory-mb=400"], "hit a limit of its process: out of memory (its limit: 400 MB)"),
    ("exit", [], "process ended before the agent said it was done (exit code 3)"),
    ("garbage", [], "broke the protocol (a message that is not JSON"),
    ("oversized", [], "broke the protocol (a message of more than 16777216 bytes)"),
])
def test_an_agent_that_ends_badly_errors_with_one_line_and_keeps_its_steps(pytester, toy, bench, write_agent, ending,
                                                                           options, message):
    spec = write_agent(ending_source(ending))
    started = time.monotonic()
    result = bench(f"--agent={spec}", "--steps=3", *options, "toy_task")
    result.assert_outcomes(errors=1)
    assert time.monotonic() - started < 240
    result.stdout.fnmatch_lines([f"*toy_task: agent MyAgent {message}*"])
    assert "Traceback" not in result.stdout.str()
    record = load_record(pytester.path)
    assert record["status"] == "error" and message.split(" (")[0] in record["error"]
    # the step it completed stays recorded, and the best code so far still had its final test
    assert record["steps_used"] == 1 and _steps(pytester.path, "toy_task")[0]["success"]
    assert record["test_metric"] == pytest.approx(TOY_TEST)
    log = _agent_log(pytester.path, "toy_task")
    assert len(log) < 400_000  # a flood is kept as its head and tail


def test_a_rerun_after_an_agent_failure_resumes_from_its_steps(pytester, toy, bench, write_agent):
    spec = write_agent(ending_source("exit"))
    bench(f"--agent={spec}", "--steps=3", "toy_task").assert_outcomes(errors=1)
    first = _steps(pytester.path, "toy_task")
    again = bench(f"--agent={spec}", "--steps=3", "toy_task")
    again.assert_outcomes(errors=1)
    record = load_record(pytester.path)
    assert record["resumed_from_step"] == 1 and _steps(pytester.path, "toy_task") == first


def test_agent_in_process_is_a_separate_run_marked_everywhere(pytester, toy, bench, write_agent):
    spec = write_agent("""
        from pytest_fmlbench import Agent

        class MyAgent(Agent):
            def run(self, session):
                session.run_step("baseline")
    """)
    result = bench(f"--agent={spec}", "--agent-in-process", "--junitxml=out.xml", "toy_task")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*toy_task*agent in process*"])
    record = load_record(pytester.path)
    assert record["agent_process"] == "in process"
    assert junit_props(pytester.path / "out.xml", "toy_task[seed0]")["agent_process"] == "in process"
    bench(f"--agent={spec}", "toy_task").assert_outcomes(passed=1)
    records = [json.loads(p.read_text()) for p in (pytester.path / "reports/fmlbench/runs/toy_task").glob("*/record.json")]
    assert sorted(r["agent_process"] for r in records) == ["bwrap", "in process"]
    assert len({r["test_metric"] for r in records}) == 1


def test_the_harness_never_imports_a_user_agent(pytester, toy, bench, write_agent):
    """The module's top-level code runs in the agent's processes only: a marker file it would write in the
    harness's process never appears, and its bad options are still one line."""
    marker = pytester.path / "imported-in-harness"
    spec = write_agent(fill("""
        import os
        from pytest_fmlbench import Agent, AgentOptions

        if os.path.isdir(os.path.dirname('MARKER')):
            open('MARKER', 'w').write(str(os.getpid()))

        class Options(AgentOptions):
            epochs: int = 100

        class MyAgent(Agent):
            name = "marker"
            Options = Options

            def run(self, session):
                session.run_step("baseline")
    """, MARKER=marker))
    bench(f"--agent={spec}", "--agent-opt", "epochs=7", "toy_task").assert_outcomes(passed=1)
    assert not marker.exists()
    assert load_record(pytester.path)["agent_options"] == {"epochs": 7}
    bad = bench(f"--agent={spec}", "--agent-opt", "bogus=1", "toy_task")
    bad.stderr.fnmatch_lines(["ERROR: agent marker has no option bogus; options: epochs"])
    assert not marker.exists()


def test_sandboxed_and_in_process_runs_score_the_same(pytester, toy, bench):
    bench("--agent=random-search", "--steps=3", "toy_task").assert_outcomes(passed=1)
    bench("--agent=random-search", "--steps=3", "--agent-in-process", "toy_task").assert_outcomes(passed=1)
    runs = sorted((pytester.path / "reports/fmlbench/runs/toy_task").iterdir())
    records = [json.loads((r / "record.json").read_text()) for r in runs]
    steps = [[json.loads(line) for line in (r / "steps.jsonl").read_text().splitlines()] for r in runs]
    assert abs(records[0]["test_metric"] - records[1]["test_metric"]) <= 1e-9
    assert [(s["action"], s["metric"], s["snapshot_sha256"]) for s in steps[0]] == \
        [(s["action"], s["metric"], s["snapshot_sha256"]) for s in steps[1]]


def test_a_sandboxed_llm_agent_decides_as_in_process_and_resumes_with_identical_replies(tmp_path, fake_llm,
                                                                                       api_keys, monkeypatch):
    """AIDE, whose model calls the harness makes for it: sandboxed or in process, the same decisions and
    scores; cut by a provider error midway, the rerun replays the recorded steps and replies, pays for
    nothing twice and ends where an uninterrupted run ends."""
    task_dir = tmp_path / "toy_task"
    shutil.copytree(REPO / "tests" / "data" / "toy_task", task_dir)
    task = load_task(task_dir / "task.yaml")
    cls = load_agent_class("aide")
    llm = llm_settings(fake_llm)

    def run(out: str, **mode):
        return execute(task, 3, RunSettings(
            agent_cls=cls, agent_name="aide", agent_options=cls.Options(num_drafts=2), out_dir=tmp_path / out,
            steps=4, model=llm.model, provider=llm.provider, llm_factory=make_llm_factory(llm), **mode))

    def decisions(outcome) -> list[tuple]:
        return [(s.action, s.parent, s.plan, s.success, s.metric, s.analysis, s.snapshot_sha256)
                for s in outcome.store.load_steps()]

    fake_llm.responder = ToyCoder(drafts=("bug", "ok"))
    sandboxed = run("sandboxed")
    assert sandboxed.record.agent_process == "bwrap" and sandboxed.record.status == "finished"
    fake_llm.responder = ToyCoder(drafts=("bug", "ok"))
    in_process = run("in-process", agent_mode="in process")
    assert decisions(sandboxed) == decisions(in_process)
    assert abs(sandboxed.record.test_metric - in_process.record.test_metric) <= 1e-9
    calls = sandboxed.record.usage.calls

    # killed midway (a provider error no longer ends a run: the port's fallback goes on), once two steps are recorded
    fake_llm.responder = ToyCoder(drafts=("bug", "ok"))

    def two_steps_recorded(seen) -> bool:
        recorded = list((tmp_path / "cut").glob("runs/toy_task/*/steps.jsonl"))
        return bool(recorded) and len(recorded[0].read_text().splitlines()) >= 2

    with monkeypatch.context() as patch:
        kill_at_call(patch, two_steps_recorded)
        with pytest.raises(RunError, match="the run was killed here"):
            run("cut")
    before = len(fake_llm.completions)
    resumed = run("cut")
    assert resumed.record.status == "finished" and resumed.record.resumed_from_step == 2
    assert decisions(resumed) == decisions(sandboxed) and resumed.record.usage.calls == calls
    assert len(fake_llm.completions) - before < calls  # the recorded replies were not asked for again
