"""The coding-tool driver and the harness's side of it, with a scripted stand-in tool (no model).

The stand-in (``stand_in_tool.py``) runs as a tool would, in the working copy the harness lends the agent
sandbox: it edits files, calls ``fmlbench-validate``, reads what it prints, and tries to read the harness,
a key and to write a protected file. Steps, records, transcripts, the final test, resume and the one-line
errors are asserted on what the harness recorded.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import junit_props
from gateway_probe import GatewayProbe, LoopbackGateway
from llm.fixtures import TOY, api_keys, fake_llm, llm_settings  # noqa: F401 (fixtures)
from pydantic import ValidationError
from stand_in_tool import StandInTool

from pytest_fmlbench.agent_host.needs import AgentNeeds, gateway_problem, needs_of
from pytest_fmlbench.agent_host.working_copy import WORKDIR_INSIDE, WorkingCopy
from pytest_fmlbench.agentkit import AgentLoadError, parse_agent_options
from pytest_fmlbench.agentkit.coding_tool import parse_tool_args
from pytest_fmlbench.agentkit.transcript import MAX_STRING_CHARS, Transcript
from pytest_fmlbench.isolation import SandboxUnavailable
from pytest_fmlbench.llm import make_llm_factory
from pytest_fmlbench.runner import RunError, RunSettings, execute
from pytest_fmlbench.scoring import process_metrics, run_note
from pytest_fmlbench.spec import load_task

SECRET_KEY = "sk-SECRET-the-tool-must-not-see-0123456789"
sandboxed = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")


@pytest.fixture
def task(tmp_path, monkeypatch):
    """The toy task in this test's folder, and a key in the harness's environment."""
    monkeypatch.setenv("OPENAI_API_KEY", SECRET_KEY)
    shutil.copytree(TOY, tmp_path / "toy_task")
    return load_task(tmp_path / "toy_task" / "task.yaml")


def run_tool(task, out: Path, steps: int, **options):
    return execute(task, 0, RunSettings(agent_cls=StandInTool, agent_name=StandInTool.name,
                                        agent_options=StandInTool.Options(**options), out_dir=out, steps=steps))


def events(step, key: str = "transcript") -> list[dict]:
    return step.extra[key]


def of_type(found: list[dict], kind: str) -> list[dict]:
    return [e for e in found if e.get("type") == kind]


def no_secret_in(folder: Path) -> None:
    for path in (p for p in folder.rglob("*") if p.is_file() and not p.is_symlink()):
        assert SECRET_KEY.encode() not in path.read_bytes(), path


# -- a whole run in the agent sandbox ---------------------------------------------------------------

@sandboxed
def test_each_validate_call_is_a_step_and_a_tool_that_stops_early_finished(task, tmp_path):
    harness_file = task.root / "harness" / "evaluate.py"
    before = harness_file.read_bytes()
    probes = (str(harness_file), str(task.root / "task.yaml"), str(tmp_path / "out"))
    outcome = run_tool(task, tmp_path / "out", steps=5, probes=probes)
    record, steps = outcome.record, outcome.store.load_steps()

    # three steps: the baseline, a better config, a broken fit; the file that did not parse cost none
    assert record.status == "finished" and record.end_reason == "agent ended" and record.agent_process == "bwrap"
    assert [s.action for s in steps] == ["validate"] * 3 and record.steps_used == 3
    assert [s.plan for s in steps] == ["baseline as given", "lr 0.5, 40 epochs", "a broken fit"]
    assert steps[0].success and steps[0].metric == pytest.approx(0.76)
    assert steps[1].success and steps[1].metric > 0.76 and steps[1].is_best
    assert not steps[2].success
    assert json.loads(outcome.store.read_snapshot(steps[1].snapshot)["config.json"]) == {"lr": 0.5, "epochs": 40}
    assert record.best_step == 2 and record.test_metric is not None and record.integrity == "ok"
    assert process_metrics(record, steps)["step_completion_rate"] == pytest.approx(3 / 5)
    assert "agent ended" in run_note(record)

    # the tool saw only its working copy: no harness, no task, no run records, no key, no protected write
    first = events(steps[0])
    (start,) = of_type(first, "start")
    assert "fmlbench-validate" in start["prompt"] and "5 steps" in start["prompt"]
    assert "algorithm.py, config.json, split_config.json" in start["prompt"] and "train.py" in start["prompt"]
    assert [p["result"] for p in of_type(first, "probe")] == ["refused: No such file or directory"] * 3
    (env,) = of_type(first, "env")
    assert env["secrets"] == [] and env["cwd"] == WORKDIR_INSIDE
    assert of_type(first, "protected")[0]["result"] == "refused: Read-only file system"
    assert steps[0].extra["ignored_changes"] == ["notes.txt"]
    assert harness_file.read_bytes() == before

    # what each call printed reached the tool, and is in the next step's transcript
    (printed,) = of_type(events(steps[1]), "validate")
    assert printed["code"] == 0 and "step 1 of 5: accuracy = 0.76 (higher is better)" in printed["output"]
    assert "best so far: step 1 (this step), accuracy = 0.76" in printed["output"]
    assert "ignored (changed, but not an editable file): notes.txt" in printed["output"]
    assert "steps left: 4" in printed["output"]
    _, refused = of_type(events(steps[2]), "validate")
    assert refused["code"] == 2 and "does not parse" in refused["output"] and "No step was used" in refused["output"]
    # after its last step: the failed step's error tail, the tool's last words, how it exited
    end = events(steps[2], "transcript_end")
    (failed,) = of_type(end, "validate")
    assert failed["code"] == 1 and "step 3 of 5 failed" in failed["output"]
    assert "stand-in broke fit" in failed["output"] and "best so far: step 2" in failed["output"]
    assert of_type(end, "result") == [{"type": "result", "text": "done exploring"}]
    assert steps[2].extra["tool_exit"] == "exited with code 0"
    no_secret_in(tmp_path)


@sandboxed
def test_a_call_after_the_budget_is_spent_runs_nothing_and_the_run_is_budget_exhausted(task, tmp_path):
    outcome = run_tool(task, tmp_path / "out", steps=2, script="exhaust")
    record, steps = outcome.record, outcome.store.load_steps()
    assert record.status == "finished" and record.end_reason is None and record.steps_used == 2
    assert process_metrics(record, steps)["step_completion_rate"] == 1.0
    assert "steps left: 0 (the step budget is spent)" in of_type(events(steps[1], "transcript_end"), "validate")[0]["output"]
    spent = of_type(events(steps[1], "transcript_end"), "validate")[1:]
    assert [c["code"] for c in spent] == [2, 2]
    assert all("the step budget is spent (all 2 steps used); nothing was run" in c["output"] for c in spent)


@sandboxed
def test_a_tool_that_exits_at_once_is_one_line_and_no_step(task, tmp_path):
    with pytest.raises(RunError) as failed:
        run_tool(task, tmp_path / "out", steps=3, script="exit-at-once")
    first, *pointers = str(failed.value).splitlines()
    assert first == ("toy_task: agent stand-in-tool crashed: ToolError: stand-in exited with code 3 before its "
                     "first fmlbench-validate: stand-in: cannot reach the model (no credentials)")
    # what follows the line points at the traceback: the record and the agent's log hold it
    assert pointers[-1].strip().startswith("traceback: ") and pointers[-1].endswith("logs/agent.log")
    (record,) = [json.loads(p.read_text()) for p in (tmp_path / "out").rglob("record.json")]
    assert record["status"] == "error" and record["steps_used"] == 0


@sandboxed
def test_the_tool_is_stopped_at_its_wall_clock_and_the_run_is_finished(task, tmp_path):
    outcome = run_tool(task, tmp_path / "out", steps=3, script="hang", wall_clock_s=20)
    assert outcome.record.status == "finished" and outcome.record.end_reason == "wall-clock budget reached"
    steps = outcome.store.load_steps()
    if steps:  # the wall clock may end before the first call on a slow machine: either way it is no error
        assert steps[-1].extra["tool_exit"].startswith("stopped at its wall clock (killed by SIG")


@sandboxed
def test_a_resumed_run_is_a_new_session_told_what_the_recorded_steps_did(task, tmp_path):
    with pytest.raises(RunError, match="process ended before the agent said it was done"):
        run_tool(task, tmp_path / "out", steps=4, script="resumable")
    (run_dir,) = (tmp_path / "out" / "runs" / "toy_task").iterdir()
    recorded = [json.loads(line) for line in (run_dir / "steps.jsonl").read_text().splitlines()]
    assert len(recorded) == 2

    outcome = run_tool(task, tmp_path / "out", steps=4, script="resumable")
    record, steps = outcome.record, outcome.store.load_steps()
    assert record.status == "finished" and record.end_reason == "agent ended" and record.resumed_from_step == 2
    assert record.steps_used == 3
    # the recorded steps are kept as they were, not replayed; the new session's step comes after them
    assert [s.model_dump(mode="json") for s in steps[:2]] == recorded
    assert steps[2].plan == "second session"
    (resumed,) = of_type(events(steps[2]), "resumed")
    # its working copy holds the last recorded step's files, and its prompt summarises the steps
    assert json.loads(resumed["config"]) == {"lr": 0.2, "epochs": 20}
    prompt = resumed["prompt"]
    assert "the files of step 2, the last step recorded before this session" in prompt
    assert "What this run did before" in prompt and "(2 left now)" in prompt
    assert f"step 1: accuracy = {steps[0].metric:.6g} (note: first session, first step)" in prompt
    assert f"step 2: accuracy = {steps[1].metric:.6g} (note: first session, second step)" in prompt
    assert "Best so far: step 1" in prompt or "Best so far: step 2" in prompt


# -- the gateway socket -----------------------------------------------------------------------------

def run_probe(task, tmp_path, fake_llm, **mode):
    llm = llm_settings(fake_llm)
    LoopbackGateway.started.clear()
    outcome = execute(task, 0, RunSettings(
        agent_cls=GatewayProbe, agent_name=GatewayProbe.name, agent_options=GatewayProbe.Options(),
        out_dir=tmp_path / "out", steps=1, model=llm.model, provider=llm.provider,
        llm_factory=make_llm_factory(llm), gateway_factory=LoopbackGateway, **mode))
    (gateway,) = LoopbackGateway.started
    return outcome.store.load_steps()[0], gateway


@sandboxed
def test_the_gateway_socket_is_reachable_inside_the_agent_sandbox_and_announced_in_hello(task, tmp_path, fake_llm,
                                                                                         api_keys):
    step, gateway = run_probe(task, tmp_path, fake_llm)
    assert step.extra["gateway"] == {"socket": "/run/fmlbench/llm.sock", "protocol": "openai", "model": "gpt-4o"}
    assert step.extra["reply"] == "pong ping" and step.extra["folder"] == ["llm.sock"]
    assert step.extra["workdir"] is None  # the probe asked for no working copy
    # closed with the agent, and its private folder removed
    assert gateway.closed and not gateway.socket_path.parent.exists()


def test_an_agent_in_the_harness_process_gets_the_gateway_socket_at_its_own_path(task, tmp_path, fake_llm, api_keys):
    step, gateway = run_probe(task, tmp_path, fake_llm, agent_mode="in process", sandboxed=False)
    assert step.extra["gateway"]["socket"] == str(gateway.socket_path) and step.extra["reply"] == "pong ping"
    assert gateway.closed and not gateway.socket_path.parent.exists()


def test_a_provider_the_tool_cannot_speak_is_one_line_before_any_record(task, tmp_path, fake_llm, api_keys):
    class AnthropicOnly(GatewayProbe):
        protocols = ("anthropic",)

    llm = llm_settings(fake_llm)
    settings = RunSettings(agent_cls=AnthropicOnly, agent_name="anthropic-only", agent_options=GatewayProbe.Options(),
                           out_dir=tmp_path / "out", steps=1, model=llm.model, provider="openai",
                           llm_factory=make_llm_factory(llm))
    with pytest.raises(RunError) as refused:
        execute(task, 0, settings)
    assert str(refused.value) == ("toy_task: agent 'anthropic-only': its tool speaks the anthropic API, but "
                                  "--provider=openai speaks the openai API; pick a provider whose API the tool speaks")
    assert not (tmp_path / "out").exists()


def test_gateway_problems_name_the_fix():
    tool = AgentNeeds(workdir=True, gateway=True, protocols=("anthropic",))
    assert gateway_problem(tool, "claude-code", "anthropic", "anthropic") is None
    assert gateway_problem(AgentNeeds(), "aide", None, None) is None
    assert "pass --model=MODEL" in gateway_problem(tool, "claude-code", None, None)
    assert "--provider=local" in gateway_problem(tool, "claude-code", "local", "local")
    assert needs_of(StandInTool) == AgentNeeds(workdir=True, gateway=False, protocols=None)
    assert needs_of(GatewayProbe) == AgentNeeds(workdir=False, gateway=True, protocols=None)
    assert AgentNeeds.from_json(tool.to_json()) == tool


# -- options, transcripts, the working copy ---------------------------------------------------------

def test_tool_args_take_only_the_tools_safe_flags():
    assert parse_tool_args("--verbose --max-turns 7", StandInTool.safe_flags) == ["--verbose", "--max-turns", "7"]
    assert parse_tool_args("--max-turns=7", StandInTool.safe_flags) == ["--max-turns=7"]
    assert StandInTool(StandInTool.Options(tool_args="--max-turns 3")).extra_args == ["--max-turns", "3"]
    with pytest.raises(ValidationError, match="'--dangerously-skip-permissions' is not a flag this tool may be given"):
        StandInTool.Options(tool_args="--dangerously-skip-permissions")
    with pytest.raises(AgentLoadError) as bad:
        parse_agent_options(StandInTool, ["tool_args=--max-turns"])
    assert str(bad.value) == "--agent-opt tool_args: Value error, --max-turns needs a value"
    with pytest.raises(ValueError, match="--verbose takes no value"):
        parse_tool_args("--verbose=1", StandInTool.safe_flags)
    with pytest.raises(ValueError, match="'prompt.txt' is not a flag"):
        parse_tool_args("prompt.txt", StandInTool.safe_flags)


def test_a_steps_transcript_keeps_its_first_and_last_events_within_the_cap():
    transcript = Transcript(max_bytes=4000)
    for i in range(100):
        transcript.add({"type": "text", "n": i, "text": "x" * 50})
    kept = transcript.take()
    assert kept[0]["n"] == 0 and kept[-1]["n"] == 99
    (cut,) = [e for e in kept if e["type"] == "cut"]
    assert cut["events"] == 100 - (len(kept) - 1)
    assert len(json.dumps(kept)) < 4500 and transcript.take() == []
    # an event larger than half the cap goes, and is counted
    transcript.add({"text": "y" * 3000})
    assert transcript.take() == [{"type": "cut", "events": 1,
                                  "note": "1 events left out: a step keeps at most 4000 bytes"}]
    # every string is cut to size
    roomy = Transcript()
    roomy.add({"text": "y" * (MAX_STRING_CHARS + 10), "nested": [{"deep": "z" * (MAX_STRING_CHARS + 1)}]})
    (event,) = roomy.take()
    assert event["text"].endswith("[... 10 characters cut]") and event["nested"][0]["deep"].endswith("[... 1 characters cut]")


def test_the_working_copy_is_outside_hidden_paths_and_shows_protected_files_read_only(task, tmp_path, monkeypatch):
    copy = WorkingCopy.create(task.workspace_dir, task.spec.protected, hidden=[tmp_path / "runs"])
    try:
        assert (copy.path / "algorithm.py").read_text() == (task.workspace_dir / "algorithm.py").read_text()
        binds = {(b.target, b.writable) for b in copy.binds()}
        assert (WORKDIR_INSIDE, True) in binds and (f"{WORKDIR_INSIDE}/train.py", False) in binds
        assert (f"{WORKDIR_INSIDE}/data", False) in binds
        assert not any(target.endswith(("algorithm.py", "config.json")) for target, _ in binds)
    finally:
        copy.close()
    assert not copy.root.exists()
    monkeypatch.setenv("TMPDIR", str(tmp_path / "runs"))
    (tmp_path / "runs").mkdir()
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    with pytest.raises(SandboxUnavailable, match="which its sandbox must hide; point TMPDIR elsewhere"):
        WorkingCopy.create(task.workspace_dir, task.spec.protected, hidden=[tmp_path / "runs"])
    assert list((tmp_path / "runs").iterdir()) == []


# -- from the command line --------------------------------------------------------------------------

@sandboxed
def test_a_users_tool_agent_from_the_command_line_declares_its_needs_through_its_own_process(pytester, toy, bench):
    """A user's agent is described by a sandboxed process of its own: what it needs travels from there."""
    shutil.copy(Path(__file__).with_name("stand_in_tool.py"), pytester.path / "stand_in_tool.py")
    result = bench("--agent=stand_in_tool.py:StandInTool", "--agent-opt", "script=exhaust", "--agent-opt",
                   "tool_args=--max-turns 3", "--steps=2", "--junitxml=out.xml", "toy_task")
    result.assert_outcomes(passed=1)
    props = junit_props(pytester.path / "out.xml", "toy_task[seed0]")
    assert float(props["step_completion_rate"]) == 1.0 and props["end_reason"] == "none"
    result.stdout.fnmatch_lines(["*Process-Level metrics*", "*Steps done*"])
    (step, _) = [json.loads(line) for line in next(pytester.path.rglob("steps.jsonl")).read_text().splitlines()]
    assert of_type(step["extra"]["transcript"], "start")[0]["flags"] == ["--max-turns", "3"]


@sandboxed
def test_a_flag_outside_the_tools_allowlist_is_one_line_before_any_run(pytester, toy, bench):
    shutil.copy(Path(__file__).with_name("stand_in_tool.py"), pytester.path / "stand_in_tool.py")
    result = bench("--agent=stand_in_tool.py:StandInTool", "--agent-opt", "tool_args=--yolo", "toy_task")
    assert result.ret != 0
    result.stderr.fnmatch_lines(["*--agent-opt tool_args: Value error, '--yolo' is not a flag this tool may be given "
                                 "here; its safe flags: --max-turns, --verbose*"])
    assert not (pytester.path / "reports").exists()
