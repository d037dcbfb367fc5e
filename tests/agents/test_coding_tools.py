"""The three general coding agents with their real tools (Claude Code, Codex CLI, mini-swe-agent), offline.

Each run is a whole benchmark run on the toy task: the tool runs in the agent sandbox, in the working copy,
and its model is a loopback wire server reached through the harness's gateway. The scripted model has the
tool look around, edit a file, validate (a step), try to read the key, the task's ``harness/`` and the
gateway's socket, write a protected file, break the algorithm, validate again (a failed step) and stop.
Asserted: the steps and their records, the transcripts, what the tool saw, the tokens in the ledger and the
records, the final test, and that the key is nowhere but in the request the gateway sent the server.

The tools are installed by ``make tools``; a test of a missing tool skips, unless FMLBENCH_REQUIRE_TOOLS=1.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
import tomllib
from pathlib import Path

import pytest
from llm.fixtures import ANTHROPIC_KEY, OPENAI_KEY, TOY, api_keys  # noqa: F401 (fixture)
from llm.wire_servers import ToolCall, Turn, WireServer

from conftest import load_record
from doc_pages import lines_starting

from pytest_fmlbench.agent_host.working_copy import WORKDIR_INSIDE
from pytest_fmlbench.agentkit import AgentLoadError, load_builtin, parse_agent_options
from pytest_fmlbench.agentkit.coding_tool import tools_dir
from pytest_fmlbench.llm import LLMSettings, make_llm_factory
from pytest_fmlbench.runner import RunError, RunSettings, execute
from pytest_fmlbench.scoring import process_metrics
from pytest_fmlbench.spec import load_task

BETTER_CONFIG = '{"lr": 0.5, "epochs": 40}\n'
BROKEN_FIT = "def fit(X, y, config):\n    raise RuntimeError('broken on purpose')\n\n\ndef predict(X, w):\n    return X\n"
BROKEN_FIT_SHELL = ("printf 'def fit(X, y, config):\\n    raise RuntimeError(\"broken on purpose\")\\n\\n\\n"
                    "def predict(X, w):\\n    return X\\n' > algorithm.py")
STEPS = 4
sandboxed = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")


def tool_installed(name: str) -> bool:
    try:
        load_builtin(name)().find_binary()
    except Exception:
        return False
    return True


def needs_tool(name: str):
    required = os.environ.get("FMLBENCH_REQUIRE_TOOLS") == "1"
    return pytest.mark.skipif(not required and not tool_installed(name),
                              reason=f"{name}'s tool is not installed (make tools)")


@pytest.fixture
def task(tmp_path):
    shutil.copytree(TOY, tmp_path / "toy_task")
    return load_task(tmp_path / "toy_task" / "task.yaml")


def probes(task) -> str:
    """One shell command trying what the tool must not do; it prints what it got."""
    harness = task.root / "harness"
    return (f"env | sort; ls {harness} 2>&1; ls ../harness 2>&1; "
            "echo tampered >> train.py 2>&1 || echo protected-refused")


def run(name: str, task, tmp_path: Path, wire: WireServer, *, provider: str, model: str, mode: dict | None = None,
        **options):
    cls = load_builtin(name)
    base_url = wire.url + "/v1" if provider == "openai" else wire.url
    settings = LLMSettings(model=model, provider=provider, base_url=base_url, backoff_s=0.001, timeout_s=30.0,
                           retries=1)
    return execute(task, 0, RunSettings(
        agent_cls=cls, agent_name=name, agent_options=cls.Options(**options), out_dir=tmp_path / "out",
        steps=STEPS, model=model, provider=provider, llm_factory=make_llm_factory(settings), **(mode or {})))


def of_type(events: list[dict], kind: str) -> list[dict]:
    found = []
    for event in events:
        found += of_type(event["events"], kind) if event.get("type") == "group" else []
        if event.get("type") == kind:
            found.append(event)
    return found


def check_run(outcome, wire: WireServer, task, tmp_path: Path, key: str, model: str) -> list:
    """What every tool's scripted session must have left; returns the steps."""
    record, steps = outcome.record, outcome.store.load_steps()
    assert record.status == "finished" and record.end_reason == "agent ended", (record.status, record.error)
    assert record.agent_process == "bwrap"
    assert [s.action for s in steps] == ["validate", "validate"] and record.steps_used == 2
    assert [s.plan for s in steps] == ["lr 0.5, 40 epochs", "a broken fit"]
    assert steps[0].success and steps[0].metric > task.spec.baseline.val and steps[0].is_best
    assert not steps[1].success and "broken on purpose" in (steps[1].error or "") + json.dumps(steps[1].extra)
    assert outcome.store.read_snapshot(steps[0].snapshot)["config.json"] == BETTER_CONFIG
    assert record.best_step == 1 and record.test_metric is not None and record.integrity == "ok"
    assert process_metrics(record, steps)["step_completion_rate"] == pytest.approx(2 / STEPS)
    # the protected file and the harness are as they were; the tool's change to neither counted
    assert (task.root / "workspace" / "train.py").read_text() == (TOY / "workspace" / "train.py").read_text()
    assert steps[1].extra["ignored_changes"] == []

    # every model call went through the gateway, with the run's model and the real key added there
    requests = wire.model_requests
    assert requests and all(r.model == model for r in requests)
    assert wire.credentials <= {key, f"Bearer {key}"} and wire.credentials
    ledger = [json.loads(line) for line in (outcome.store.dir / "llm_calls.jsonl").read_text().splitlines()]
    assert len(ledger) == len(requests) and all(c["via"] == "gateway" and c["purpose"] == "tool" for c in ledger)
    # the tool itself asked for the run's model (the gateway would serve it anyway, noting what was asked)
    assert all(c.get("requested_model") in (None, model) for c in ledger)
    assert sum(c["usage"]["input_tokens"] for c in ledger) == record.usage.input_tokens == 100 * len(requests)
    assert record.usage.calls == len(requests) and record.usage.output_tokens == 20 * len(requests)
    # each step's record holds the calls since the previous one; the closing call (after the last step) is
    # in the run's total only
    assert sum(s.usage.calls for s in steps) == len(requests) - 1

    # the key is in no file of the run, the task or the test (nor in what the tool sent or got back)
    for path in (p for p in tmp_path.rglob("*") if p.is_file() and not p.is_symlink()):
        assert key.encode() not in path.read_bytes(), path
    for request in requests:
        assert key not in json.dumps(request.body)
    return steps


def check_probes(seen: str, task) -> None:
    """What the probe command printed, as the tool sent it back to the model."""
    assert "evaluate.py" not in seen and "prepare.py" not in seen  # the harness's files
    assert seen.count("No such file or directory") >= 2 and "protected-refused" in seen
    assert "Read-only file system" in seen
    assert OPENAI_KEY not in seen and ANTHROPIC_KEY not in seen


# -- Claude Code -------------------------------------------------------------------------------------

def claude_script(task) -> list[Turn]:
    config = f"{WORKDIR_INSIDE}/config.json"
    return [
        Turn("I'll look at the task first.", [ToolCall("Bash", {"command": "ls && cat config.json",
                                                                  "description": "List files"})]),
        # Claude Code edits only a file it has read in this session
        Turn("", [ToolCall("Read", {"file_path": config})]),
        Turn("", [ToolCall("Edit", {"file_path": config, "old_string": '{"lr": 0.01, "epochs": 5}',
                                    "new_string": BETTER_CONFIG.strip()})]),
        Turn("", [ToolCall("Bash", {"command": "fmlbench-validate 'lr 0.5, 40 epochs'", "description": "Validate"})]),
        Turn("", [ToolCall("Bash", {"command": probes(task), "description": "Probe"})]),
        Turn("", [ToolCall("Bash", {"command": f"{BROKEN_FIT_SHELL} && fmlbench-validate 'a broken fit'",
                                    "description": "Break it"})]),
        Turn("Done: step 1 is the best."),
    ]


@sandboxed
@needs_tool("claude-code")
def test_claude_code(task, tmp_path, api_keys):
    with WireServer(*claude_script(task)) as wire:
        outcome = run("claude-code", task, tmp_path, wire, provider="anthropic", model="claude-opus-4-1")
    steps = check_run(outcome, wire, task, tmp_path, ANTHROPIC_KEY, "claude-opus-4-1")
    requests = wire.model_requests
    assert len(requests) == 7 and all(r.stream and r.path.endswith("/v1/messages") for r in requests)
    # not remapped to its current Opus; no web tools; the task prompt first
    tools = [t.get("name") for t in requests[0].body["tools"]]
    assert "Bash" in tools and "WebSearch" not in tools and "WebFetch" not in tools
    assert "fmlbench-validate" in requests[0].text and f"{STEPS} steps" in requests[0].text

    # what fmlbench-validate printed reached the model
    (validated,) = requests[4].tool_outputs
    assert "step 1 of 4: accuracy = " in validated and "best so far: step 1 (this step)" in validated
    assert "steps left: 3" in validated
    check_probes(requests[5].tool_outputs[0], task)
    (failed,) = requests[6].tool_outputs
    assert "step 2 of 4 failed" in failed and "broken on purpose" in failed

    first = steps[0].extra["transcript"]
    (start,) = of_type(first, "start")
    assert start["tool"] == "claude-code" and start["model"] == "claude-opus-4-1"
    assert "Bash" in start["tools"] and not {"WebFetch", "WebSearch"} & set(start["tools"])
    assert [e["command"] for e in of_type(first, "command")] == ["ls && cat config.json",
                                                                 "fmlbench-validate 'lr 0.5, 40 epochs'"]
    (edit,) = of_type(first, "edit")
    assert edit["tool"] == "Edit" and edit["path"].endswith("config.json") and edit["new_string"] == BETTER_CONFIG.strip()
    assert "I'll look at the task first." in [m["text"] for m in of_type(first, "message")]
    second = steps[1].extra["transcript"]
    assert any("Read-only file system" in o["text"] for o in of_type(second, "output"))
    (result,) = of_type(steps[1].extra["transcript_end"], "result")
    assert result["ok"] and result["text"] == "Done: step 1 is the best." and result["turns"] == 7
    assert result["usage"]["output_tokens"] == 20 * 7


@sandboxed
@needs_tool("claude-code")
def test_a_tool_refused_by_the_token_budget_before_its_first_step_is_stopped_not_an_error(task, tmp_path, api_keys):
    # the first call alone (120 tokens) crosses --max-tokens=50: the gateway refuses the second, Claude Code
    # exits at that 403 before any fmlbench-validate
    cls = load_builtin("claude-code")
    settings = LLMSettings(model="claude-opus-4-1", provider="anthropic", backoff_s=0.001, timeout_s=30.0,
                           retries=1, max_tokens=50)
    turns = [Turn("", [ToolCall("Bash", {"command": "ls", "description": "List files"})]), Turn("Done.")]
    with WireServer(*turns) as wire:
        settings = settings.model_copy(update={"base_url": wire.url})
        outcome = execute(task, 0, RunSettings(
            agent_cls=cls, agent_name="claude-code", agent_options=cls.Options(), out_dir=tmp_path / "out", steps=STEPS,
            model="claude-opus-4-1", provider="anthropic", llm_factory=make_llm_factory(settings)))
    record = outcome.record
    assert len(wire.model_requests) == 1
    assert record.status == "stopped" and "max-tokens 50 exceeded" in record.stop_reason, (record.status, record.error)
    assert record.steps_used == 0 and record.usage.total_tokens == 120 and record.test_metric is not None


@sandboxed
@needs_tool("claude-code")
def test_claude_code_resumed_is_a_new_session_told_what_the_recorded_steps_did(task, tmp_path, api_keys):
    config = f"{WORKDIR_INSIDE}/config.json"
    # the first session validates once, then its driver dies (the agent's process, as in a crash)
    first = [Turn("", [ToolCall("Bash", {"command": f"printf '{BETTER_CONFIG.strip()}\\n' > {config} && "
                                                     "fmlbench-validate 'first session'", "description": "Validate"})]),
             Turn("", [ToolCall("Bash", {"command": "kill -KILL $(pgrep -f pytest_fmlbench.agent_host.child)",
                                         "description": "Crash"})])]
    with WireServer(*first) as wire, pytest.raises(RunError, match="process ended before the agent said it was done"):
        run("claude-code", task, tmp_path, wire, provider="anthropic", model="claude-opus-4-1")
    second = [Turn("", [ToolCall("Bash", {"command": "cat config.json && fmlbench-validate 'second session'",
                                          "description": "Validate"})]), Turn("Done.")]
    with WireServer(*second) as wire:
        outcome = run("claude-code", task, tmp_path, wire, provider="anthropic", model="claude-opus-4-1")
    record, steps = outcome.record, outcome.store.load_steps()
    assert record.status == "finished" and record.end_reason == "agent ended" and record.resumed_from_step == 1
    assert [s.plan for s in steps] == ["first session", "second session"] and record.steps_used == 2
    # a new conversation, not a replay: its first request is the task prompt, which summarises step 1
    opening = wire.model_requests[0]
    assert len(opening.body["messages"]) == 1 and "What this run did before" in opening.text
    assert f"step 1: accuracy = {steps[0].metric:.6g} (note: first session)" in opening.text
    # its working copy holds the files of the recorded step
    assert BETTER_CONFIG.strip() in wire.model_requests[1].tool_outputs[0]
    assert len(wire.model_requests) == 2


# -- Codex CLI ---------------------------------------------------------------------------------------

def codex_script(task) -> list[Turn]:
    # yield_time_ms: a validation run outlasting it would come back as a session to poll
    wait = {"yield_time_ms": 30000}
    return [
        Turn("Looking around.", [ToolCall("exec_command", {"cmd": "ls && cat config.json"})]),
        Turn("", [ToolCall("exec_command", {"cmd": f"printf '{BETTER_CONFIG.strip()}\\n' > config.json && "
                                                   "fmlbench-validate 'lr 0.5, 40 epochs'", **wait})]),
        Turn("", [ToolCall("exec_command", {"cmd": probes(task)})]),
        Turn("", [ToolCall("exec_command", {"cmd": f"{BROKEN_FIT_SHELL} && fmlbench-validate 'a broken fit'",
                                            **wait})]),
        Turn("Done: step 1 is the best."),
    ]


@sandboxed
@needs_tool("codex")
def test_codex(task, tmp_path, api_keys):
    with WireServer(*codex_script(task)) as wire:
        outcome = run("codex", task, tmp_path, wire, provider="openai", model="gpt-5.4")
    steps = check_run(outcome, wire, task, tmp_path, OPENAI_KEY, "gpt-5.4")
    requests = wire.model_requests
    assert len(requests) == 5 and all(r.stream and r.path.endswith("/v1/responses") for r in requests)
    # gpt-5.4 is not in Codex's bundled catalog: it was given gpt-5.5's metadata, apply_patch included
    tools = [t.get("name") or t.get("type") for t in requests[0].body["tools"]]
    assert "exec_command" in tools and "apply_patch" in tools and "web_search" not in tools
    assert "fmlbench-validate" in requests[0].text

    validated = requests[2].tool_outputs[0]
    assert "step 1 of 4: accuracy = " in validated and "steps left: 3" in validated
    check_probes(requests[3].tool_outputs[0], task)
    assert "step 2 of 4 failed" in requests[4].tool_outputs[0]

    first = steps[0].extra["transcript"]
    (start,) = of_type(first, "start")
    assert start["tool"] == "codex" and not of_type(first, "error")  # no "model metadata not found"
    commands = of_type(first, "command")
    assert len(commands) == 2 and "fmlbench-validate 'lr 0.5, 40 epochs'" in commands[1]["command"]
    (listed,) = of_type(first, "output")  # the validation's own output ends it, in the next step's transcript
    assert listed["id"] == commands[0]["id"] and listed["exit_code"] == 0 and "config.json" in listed["text"]
    validated_event = of_type(steps[1].extra["transcript"], "output")[0]
    assert validated_event["id"] == commands[1]["id"] and "step 1 of 4" in validated_event["text"]
    assert [m["text"] for m in of_type(first, "message")] == ["Looking around."]
    (result,) = of_type(steps[1].extra["transcript_end"], "result")
    assert result["ok"] and result["usage"]["input_tokens"] == 100 * 5


@sandboxed
@needs_tool("codex")
def test_codex_with_catalog_model_empty_keeps_codex_fallback(task, tmp_path, api_keys):
    script = [Turn("", [ToolCall("exec_command", {"cmd": f"printf '{BETTER_CONFIG.strip()}\\n' > config.json && "
                                                         "fmlbench-validate 'lr 0.5, 40 epochs'",
                                                  "yield_time_ms": 30000})]), Turn("Enough.")]
    with WireServer(*script) as wire:
        outcome = run("codex", task, tmp_path, wire, provider="openai", model="gpt-5.4", catalog_model="",
                      tool_args="-c model_reasoning_effort=high")
    assert outcome.record.steps_used == 1 and outcome.record.end_reason == "agent ended"
    first = wire.model_requests[0].body
    assert "apply_patch" not in [t.get("name") for t in first["tools"]]
    assert first["reasoning"]["effort"] == "high"  # the safe -c override reached the model
    errors = of_type(outcome.store.load_steps()[0].extra["transcript"], "error")
    assert any("Model metadata for `gpt-5.4` not found" in e["message"] for e in errors)


# -- mini-swe-agent ----------------------------------------------------------------------------------

def mini_tool_script(task) -> list[Turn]:
    def bash(text: str, command: str) -> Turn:
        return Turn(text, [ToolCall("bash", {"command": command})])

    return [
        bash("Let me look.", "ls && cat config.json"),
        bash("Better settings.", f"printf '{BETTER_CONFIG.strip()}\\n' > config.json && "
                                 "fmlbench-validate 'lr 0.5, 40 epochs'"),
        bash("Probing.", probes(task)),
        bash("Break it.", f"{BROKEN_FIT_SHELL} && fmlbench-validate 'a broken fit'"),
        bash("Done: step 1 is the best.", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"),
    ]


def mini_text_script(task) -> list[Turn]:
    def block(text: str, command: str) -> Turn:
        return Turn(f"THOUGHT: {text}\n\n```mswea_bash_command\n{command}\n```")

    return [
        block("Let me look.", "ls && cat config.json"),
        Turn("THOUGHT: a reply without a command is a format error, sent back to the model"),
        block("Better settings.", f"printf '{BETTER_CONFIG.strip()}\\n' > config.json && "
                                  "fmlbench-validate 'lr 0.5, 40 epochs'"),
        block("Probing.", probes(task)),
        block("Break it.", f"{BROKEN_FIT_SHELL} && fmlbench-validate 'a broken fit'"),
        block("Done: step 1 is the best.", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"),
    ]


@sandboxed
@needs_tool("mini-swe-agent")
def test_mini_swe_agent_tool_calls_over_openai_chat(task, tmp_path, api_keys):
    with WireServer(*mini_tool_script(task)) as wire:
        outcome = run("mini-swe-agent", task, tmp_path, wire, provider="openai", model="gpt-5.4",
                      tool_args="model.model_kwargs.temperature=0.25")
    steps = check_run(outcome, wire, task, tmp_path, OPENAI_KEY, "gpt-5.4")
    requests = wire.model_requests
    assert len(requests) == 5 and all(r.path.endswith("/v1/chat/completions") for r in requests)
    assert [t["function"]["name"] for t in requests[0].body["tools"]] == ["bash"]
    assert all(r.body.get("temperature") == 0.25 for r in requests)  # the safe override reached the model
    assert "fmlbench-validate" in requests[0].text and "Please solve this issue" in requests[0].text

    validated = requests[2].tool_outputs[0]
    assert "step 1 of 4: accuracy = " in validated
    check_probes(requests[3].tool_outputs[0], task)

    first = steps[0].extra["transcript"]
    assert [p["role"] for p in of_type(first, "prompt")] == ["system", "user"]
    assert [c["command"] for c in of_type(first, "command")][0] == "ls && cat config.json"
    assert [u["input_tokens"] for u in of_type(first, "usage")] == [100, 100]
    (result,) = of_type(steps[1].extra["transcript_end"], "result")
    assert result["ok"] and result["exit_status"] == "Submitted"


@sandboxed
@needs_tool("mini-swe-agent")
def test_mini_swe_agent_text_blocks_over_anthropic(task, tmp_path, api_keys):
    with WireServer(*mini_text_script(task)) as wire:
        outcome = run("mini-swe-agent", task, tmp_path, wire, provider="anthropic", model="claude-sonnet-4-5",
                      config="mini_textbased")
    steps = check_run(outcome, wire, task, tmp_path, ANTHROPIC_KEY, "claude-sonnet-4-5")
    requests = wire.model_requests
    assert len(requests) == 6 and all(r.path.endswith("/v1/messages") for r in requests)
    assert not requests[0].body.get("tools") and "mswea_bash_command" in requests[0].text
    first = steps[0].extra["transcript"]
    (rejected,) = of_type(first, "format_error")
    assert "Expected exactly 1 action, found 0" in rejected["text"]
    assert rejected["model_response"].startswith("THOUGHT: a reply without a command")


# -- as users type it -----------------------------------------------------------------------------------

CODING_AGENTS = ("claude-code", "codex", "mini-swe-agent")
# as the README and the coding agents' how-to show them
README_LINES = [shlex.split(line.split("#")[0]) for line in lines_starting(
    tuple(f"pytest --agent={agent} " for agent in CODING_AGENTS), "README.md", "how-to/coding-agent.md")]


def one_step_session(agent: str, options: dict[str, str]) -> list[Turn]:
    """A session that validates the code as given once, then ends, in the tool's own way."""
    validate = "fmlbench-validate 'as given'"
    if agent == "claude-code":
        return [Turn("", [ToolCall("Bash", {"command": validate, "description": "Validate"})]), Turn("Done.")]
    if agent == "codex":
        return [Turn("", [ToolCall("exec_command", {"cmd": validate, "yield_time_ms": 30000})]), Turn("Done.")]
    if options.get("config") == "mini_textbased":
        return [Turn(f"THOUGHT: measure.\n\n```mswea_bash_command\n{command}\n```")
                for command in (validate, "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT")]
    return [Turn("", [ToolCall("bash", {"command": command})])
            for command in (validate, "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT")]


def test_the_readme_shows_a_command_for_each_coding_agent():
    assert {words[1].split("=")[1] for words in README_LINES} == set(CODING_AGENTS)


@sandboxed
@pytest.mark.parametrize("words", README_LINES, ids=[" ".join(w[1:3]) for w in README_LINES])
def test_the_readme_commands(pytester, toy, bench, api_keys, words):
    agent = words[1].split("=")[1]
    (model,) = [w.split("=", 1)[1] for w in words if w.startswith("--model=")]
    if not tool_installed(agent) and os.environ.get("FMLBENCH_REQUIRE_TOOLS") != "1":
        pytest.skip(f"{agent}'s tool is not installed (make tools)")
    # --agent-opt=NAME=VALUE (the README writes each value in one word) or --agent-opt NAME=VALUE
    pairs = [w.removeprefix("--agent-opt=") for w in words if w.startswith("--agent-opt=")]
    pairs += [value for flag, value in zip(words, words[1:]) if flag == "--agent-opt"]
    options = dict(pair.split("=", 1) for pair in pairs)
    anthropic = "--provider=anthropic" in words or model.startswith("claude")
    with WireServer(*one_step_session(agent, options)) as wire:
        # the README's command on the toy task, its model served by the loopback server, two steps
        result = bench(*[w for w in words[1:] if w not in ("-k", "privacy")],
                       f"--base-url={wire.url if anthropic else wire.url + '/v1'}", "--steps=2", "toy_task")
    result.assert_outcomes(passed=1)
    record = load_record(pytester.path)
    assert (record["agent"], record["model"], record["status"]) == (agent, model, "finished")
    assert record["end_reason"] == "agent ended" and record["steps_used"] == 1
    for name, value in options.items():
        given = record["agent_options"][name]
        assert given == float(value) if isinstance(given, float) else given == value
    assert wire.model_requests and all(r.model == model for r in wire.model_requests)


# -- bad input: one line, before any step ------------------------------------------------------------

@pytest.mark.parametrize(("name", "tool_args", "says"), [
    ("claude-code", "--model claude-opus-4-1", "'--model' is not a flag this tool may be given here"),
    ("claude-code", "--settings /tmp/x.json", "'--settings' is not a flag"),
    ("codex", "-c model_provider=openai", "-c model_provider: not a setting this tool may be given here"),
    ("codex", "--enable web_search_request", "'--enable' is not a flag"),
    ("mini-swe-agent", "model.model_kwargs.api_base=http://example.com", "is not a flag"),
])
def test_an_unsafe_tool_flag_is_one_line(name, tool_args, says):
    with pytest.raises(AgentLoadError) as refused:
        parse_agent_options(load_builtin(name), [f"tool_args={tool_args}"])
    assert says in str(refused.value) and "\n" not in str(refused.value)


def test_the_safe_flags_pass(tmp_path):
    claude = parse_agent_options(load_builtin("claude-code"), ["tool_args=--effort high --disallowedTools Task"])
    assert load_builtin("claude-code")(claude).extra_args == ["--effort", "high", "--disallowedTools", "Task"]
    mini_cls = load_builtin("mini-swe-agent")
    mini = mini_cls(parse_agent_options(mini_cls, ["tool_args=agent.step_limit 30 environment.timeout=600"]))
    assert mini.overrides() == ["agent.step_limit=30", "environment.timeout=600"]


@sandboxed
def test_a_provider_the_tool_cannot_speak_is_one_line_before_any_step(task, tmp_path, api_keys):
    with WireServer() as wire, pytest.raises(RunError) as refused:
        run("codex", task, tmp_path, wire, provider="anthropic", model="claude-opus-4-1")
    assert "codex" in str(refused.value) and "openai" in str(refused.value) and "\n" not in str(refused.value)
    assert not wire.requests and not list((tmp_path / "out").rglob("steps.jsonl"))


@pytest.mark.parametrize(("name", "provider", "model", "looked"), [
    ("claude-code", "anthropic", "claude-opus-4-1", "claude-code-linux-"),
    ("codex", "openai", "gpt-5.4", "codex-linux-"),
    ("mini-swe-agent", "openai", "gpt-5.4", "mini-swe-agent"),
])
def test_a_missing_tool_is_one_line_naming_make_tools(name, provider, model, looked, task, tmp_path, api_keys,
                                                      monkeypatch):
    # in the harness's process, where this test can point the agent's module at an empty tools folder
    module = sys.modules[load_builtin(name).__module__]
    monkeypatch.setattr(module, "tools_dir", lambda: tmp_path / "no-tools")
    with WireServer() as wire, pytest.raises(RunError) as missing:
        run(name, task, tmp_path, wire, provider=provider, model=model,
            mode={"agent_mode": "in process", "sandboxed": False})
    message = str(missing.value)
    assert "\n" not in message and "is not installed here" in message and looked in message
    assert "make tools" in message and not wire.requests


def test_the_tools_live_in_the_interpreters_prefix():
    # inside every sandbox .venv is visible read-only; a tool anywhere else would not be
    assert tools_dir().parent == Path(sys.prefix)


def test_codex_config_is_toml_codex_reads(tmp_path):
    codex = load_builtin("codex")
    from pytest_fmlbench_agents.codex import config_toml

    text = config_toml("http://127.0.0.1:4242", tmp_path / "models.json")
    parsed = tomllib.loads(text)
    assert parsed["model_providers"]["fmlbench"]["base_url"] == "http://127.0.0.1:4242/v1"
    assert parsed["allow_login_shell"] is False and parsed["web_search"] == "disabled"
    assert codex.protocols == ("openai",)
