"""``--agent=human``: a scripted person drives the shell through tmux, as a person would from a terminal.

The person's terminal is a tmux server of the test's own (the "outer" one, on the host): it runs
``fmlbench attach``, whose client talks to the run's tmux server inside the agent sandbox; the test types
into the outer terminal (``send-keys``) and reads its screen (``capture-pane``). Steps, records, the
transcript, the final test, the sandbox's view and attach after a killed terminal are asserted on what
the harness recorded.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from llm.fake_llm import Say
from llm.fixtures import TOY, api_keys, fake_llm, llm_settings  # noqa: F401 (fixtures)

from pytest_fmlbench.agent_host.launcher import AgentLimits
from pytest_fmlbench.agent_host.needs import AgentNeeds, needs_of
from pytest_fmlbench.agentkit.human_sessions import find_sessions, matching
from pytest_fmlbench.agentkit.human_terminal import ActiveTime, clean_output, idle_rule, parse_command_log
from pytest_fmlbench.agentkit.loading import load_builtin
from pytest_fmlbench.cli.commands import main as fmlbench
from pytest_fmlbench.llm import make_llm_factory
from pytest_fmlbench.reports.human_baseline import active_seconds, shell_session
from pytest_fmlbench.runner import RunSettings, execute
from pytest_fmlbench.spec import load_task

SECRET_KEY = "sk-SECRET-the-person-must-not-see-0123456789"
# as the coding tools' tests: a missing tool skips, unless FMLBENCH_REQUIRE_TOOLS=1 (CI), where it fails
needs_tools = pytest.mark.skipif((shutil.which("bwrap") is None or shutil.which("tmux") is None)
                                 and os.environ.get("FMLBENCH_REQUIRE_TOOLS") != "1",
                                 reason="bubblewrap and tmux are needed (make sandbox installs them)")
SCREEN_TIMEOUT_S = 60.0


class Terminal:
    """The person's terminal: a tmux server of the test's own, holding one shell."""

    def __init__(self, folder: Path, name: str):
        self.socket = str(folder / f"{name}.sock")
        self.tmux("new-session", "-d", "-x", "160", "-y", "48", "bash", "--norc", "--noprofile")

    def tmux(self, *args: str) -> str:
        return subprocess.run(["tmux", "-S", self.socket, "-f", "/dev/null", *args], capture_output=True,
                              text=True, check=True, timeout=30).stdout

    def type(self, line: str) -> None:
        self.tmux("send-keys", "-l", line)
        self.tmux("send-keys", "Enter")

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-S", "-200")

    def wait_for(self, text: str, timeout_s: float = SCREEN_TIMEOUT_S) -> str:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            screen = self.screen()
            if text in screen:
                return screen
            time.sleep(0.2)
        raise AssertionError(f"{text!r} never showed on the person's screen:\n{self.screen()}")

    def tty(self) -> str:
        return self.tmux("display-message", "-p", "#{pane_tty}").strip()

    def kill(self) -> None:
        subprocess.run(["tmux", "-S", self.socket, "kill-server"], capture_output=True, timeout=30)


@pytest.fixture
def task(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET_KEY)
    shutil.copytree(TOY, tmp_path / "toy_task")
    return load_task(tmp_path / "toy_task" / "task.yaml")


def start_run(task, out: Path, steps: int, agent: str = "human", agent_limits: AgentLimits = AgentLimits(),
              llm=None, **options):
    human = load_builtin(agent)
    lent = {} if llm is None else dict(model=llm.model, provider=llm.provider, llm_factory=make_llm_factory(llm))
    result: dict = {"announced": []}
    settings = RunSettings(agent_cls=human, agent_name=human.name, agent_options=human.Options(**options),
                           out_dir=out, steps=steps, agent_limits=agent_limits, announce=result["announced"].append,
                           **lent)

    def run() -> None:
        try:
            result["outcome"] = execute(task, 0, settings)
        except BaseException as exc:  # the test's thread reports it
            result["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, result


def wait_for_session(task_id: str, started: float, steps_total: int, timeout_s: float = SCREEN_TIMEOUT_S):
    """The session this test started (another test's may wait beside it, under -n)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = [s for s in matching(find_sessions(), task_id)
                 if s.beacon.started >= started and s.beacon.steps_total == steps_total]
        if found:
            return found[0]
        time.sleep(0.2)
    raise AssertionError("no human session started")


ATTACH = f"env -u TMUX {sys.executable} -m pytest_fmlbench.cli attach --pid {{pid}} toy_task"


# the person asks the run's model through the gateway URL their shell was given, with the placeholder key it holds
ASK_MODEL = (f"{sys.executable} -c \"import json, os, urllib.request as r; q = r.Request(os.environ['OPENAI_BASE_URL'] "
             "+ '/chat/completions', json.dumps({'model': os.environ['FMLBENCH_MODEL'], 'messages': [{'role': 'user', "
             "'content': 'a hint?'}]}).encode(), {'content-type': 'application/json', 'authorization': 'Bearer ' + "
             "os.environ['OPENAI_API_KEY']}); print('model says:', json.load(r.urlopen(q))['choices'][0]['message']"
             "['content'])\"")


@needs_tools
def test_a_person_edits_validates_detaches_survives_a_killed_terminal_and_submits(task, tmp_path, fake_llm, api_keys):
    """As human-assisted: the same session as --agent=human's, with the run's gateway lent to the shell."""
    harness_file = task.root / "harness" / "evaluate.py"
    before = harness_file.read_bytes()
    fake_llm.script(Say("try a larger learning rate"))
    started = time.time()
    thread, result = start_run(task, tmp_path / "out", steps=3, agent="human-assisted", llm=llm_settings(fake_llm),
                               wall_clock_s=240)
    session = wait_for_session(task.id, started, steps_total=3)
    person = Terminal(tmp_path, "person")
    try:
        person.type(ATTACH.format(pid=session.pid))
        person.wait_for("fmlbench: a human baseline on toy_task")
        # the sandbox's tmux server holds a terminal that dies with the attach command, never the person's own
        held = {os.readlink(fd) for fd in Path(f"/proc/{session.pid}/fd").iterdir()}
        assert person.tty() not in held and any(path.startswith("/dev/pts/") for path in held), held
        # what the person can reach: no harness, no task folder, no run records, no key
        person.type(f"ls {task.root / 'harness'} harness /workspace/harness {tmp_path / 'out'}; echo probe-$((1 + 1))")
        probe = person.wait_for("probe-2\n")
        assert probe.count("No such file or directory") == 4
        person.type("env | grep -c -e SECRET -e LOOPBACK; grep -rl -e SECRET -e LOOPBACK /proc/*/environ 2>/dev/null "
                    "| wc -l; echo keys-$((1 + 1))")
        keys = person.wait_for("keys-2\n")
        assert "\n0\n0\nkeys-2" in keys, keys
        person.type(ASK_MODEL)
        person.wait_for("model says: try a larger learning rate")
        person.type("echo '{\"lr\": 0.5, \"epochs\": 40}' > config.json && echo note > notes.txt")
        person.type("fmlbench-validate 'lr 0.5, 40 epochs'")
        person.wait_for("step 1 of 3: accuracy")
        # a shell variable survives a detach and an attach
        person.type("export MARK=kept-across-attach")
        person.type("fmlbench-detach")
        person.wait_for("[detached")
        person.type(ATTACH.format(pid=session.pid))
        person.wait_for("fmlbench-validate 'lr 0.5, 40 epochs'")
        person.type("echo mark=$MARK")
        person.wait_for("mark=kept-across-attach")
        # the terminal dies (its window closed, the SSH link lost): the session and its step remain
        person.kill()
        person = Terminal(tmp_path, "person-again")
        person.type(ATTACH.format(pid=session.pid))
        person.wait_for("mark=kept-across-attach")
        # leaving the shell starts a new one: only fmlbench-submit (or the clock) ends the session
        person.type("exit")
        # as a person would: typed again once the new shell is there (what is typed before goes nowhere)
        for _ in range(30):
            person.type("echo new-shell-$((2 + 3))")
            try:
                person.wait_for("new-shell-5", timeout_s=2.0)
                break
            except AssertionError:
                continue
        person.wait_for("new-shell-5")
        assert [s.label for s in matching(find_sessions(), task.id) if s.pid == session.pid] == [session.label]
        person.type("fmlbench-status")
        status = person.wait_for("active: ")
        assert "steps: 1 used, 2 left of 3" in status and "best so far: step 1" in status
        person.type("fmlbench-submit")
        thread.join(timeout=120)
    finally:
        person.kill()
    assert not thread.is_alive() and "error" not in result, result.get("error")
    # the session's tmux server (and with it the shell and what it started) ended with the run
    deadline = time.monotonic() + 10
    while Path(f"/proc/{session.pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not Path(f"/proc/{session.pid}").exists()
    outcome = result["outcome"]
    record, steps = outcome.record, outcome.store.load_steps()
    assert record.status == "finished" and record.end_reason == "submitted by the person"
    assert record.agent == "human-assisted" and record.agent_process == "bwrap" and record.model == "gpt-4o"
    # the model's call is the run's: counted, and made with the key the gateway added outside the sandbox
    assert record.usage.calls == 1 and fake_llm.completions[0].headers["authorization"] == f"Bearer {api_keys['openai']}"
    assert [s.plan for s in steps] == ["lr 0.5, 40 epochs"] and steps[0].success and steps[0].metric > 0.76
    assert json.loads(outcome.store.read_snapshot(steps[0].snapshot)["config.json"]) == {"lr": 0.5, "epochs": 40}
    assert record.best_step == 1 and record.test_metric is not None and record.integrity == "ok"
    assert steps[0].extra["ignored_changes"] == ["notes.txt"]
    assert harness_file.read_bytes() == before

    # the transcript: the session's start, the commands and their output, the person's active time
    first, end = steps[0].extra["transcript"], steps[0].extra["transcript_end"]
    (start,) = [e for e in first if e["type"] == "start"]
    assert start["tool"] == "human" and "fmlbench-validate" in start["prompt"]
    commands = [e["command"] for e in first + end if e["type"] == "command"]
    assert commands[-2:] == ["fmlbench-status", "fmlbench-submit"] and "exit" in commands
    assert "fmlbench-validate 'lr 0.5, 40 epochs'" in commands
    output = "".join(e["text"] for e in first + end if e["type"] == "output")
    assert "probe-2" in output and "step 1 of 3: accuracy" in output
    assert "fmlbench-submit" in shell_session(steps[0].extra) and "\x1b" not in shell_session(steps[0].extra)
    activity = [e for e in end if e["type"] == "activity"][-1]
    assert 0 < activity["active_s"] <= activity["session_s"] and activity["rule"] == idle_rule(300.0)
    assert active_seconds(steps) == activity["active_s"]
    # the record marks the run a person's, with their active time
    assert record.human is True and record.human_active_s == activity["active_s"]
    for path in (p for p in (tmp_path / "out").rglob("*") if p.is_file()):
        assert not {SECRET_KEY, *api_keys.values()} & {k for k in (SECRET_KEY, *api_keys.values())
                                                       if k.encode() in path.read_bytes()}, path


@needs_tools
def test_the_agent_timeout_ends_a_session_nobody_attached_to_with_the_final_test(task, tmp_path):
    started = time.monotonic()
    thread, result = start_run(task, tmp_path / "out", steps=2, agent_limits=AgentLimits(timeout_s=12))
    thread.join(timeout=120)
    assert "error" not in result, result.get("error")
    record = result["outcome"].record
    # its wall clock: the budget less a margin to end cleanly, so the agent's process is never killed for it
    assert record.status == "finished" and record.end_reason == "wall-clock budget reached"
    assert record.steps_used == 0 and record.test_on_baseline and record.test_metric is not None
    assert record.human is True and record.human_active_s is None  # nobody attached: no key was pressed
    assert 7 <= time.monotonic() - started < 60
    # the item said, in one line, what the person runs
    assert [line for line in result["announced"] if "fmlbench attach toy_task" in line] == [
        "[fmlbench] toy_task[seed0]: waiting for a person: run `fmlbench attach toy_task` in another terminal "
        "(detach: C-b d or fmlbench-detach; end: fmlbench-submit)"]


# -- the parts, without a sandbox -----------------------------------------------------------------

def test_active_time_counts_short_gaps_in_full_and_long_ones_not_at_all():
    active = ActiveTime(idle_gap_s=300)
    for when in (1000, 1010, 1010, 1100, 2000, 2005, 1990):
        active.saw(when)
    # 10 + 90, then a 900 s gap is idle, then 5; a time out of order adds nothing
    assert active.active_s == 105


def test_the_command_log_and_terminal_output_are_read_as_text():
    log = "\x1e0 1700000010\n   12  1700000003 ls -l\n\x1e1 1700000020\n   13* 1700000015 for x in 1 2\ndo echo $x\ndone\n"
    assert parse_command_log(log) == [
        {"type": "command", "command": "ls -l", "history": 12, "entered": 1700000003, "ended": 1700000010,
         "exit_code": 0},
        {"type": "command", "command": "for x in 1 2\ndo echo $x\ndone", "history": 13, "entered": 1700000015,
         "ended": 1700000020, "exit_code": 1}]
    assert clean_output("\x1b[1;32mok\x1b[0m\r\n10%\r50%\r100%\n\x1b]0;title\x07done") == "ok\n100%\ndone"


def test_attach_without_a_waiting_session_says_so(capsys):
    assert fmlbench(["attach", "no-such-task"]) == 1
    assert "no human session for 'no-such-task' waits on this machine" in capsys.readouterr().err


def test_the_assisted_person_is_lent_the_gateway_and_gets_its_url_never_a_key():
    assisted, human = load_builtin("human-assisted"), load_builtin("human")
    assert needs_of(human) == AgentNeeds(workdir=True, gateway=False)
    assert needs_of(assisted) == AgentNeeds(workdir=True, gateway=True) and assisted.uses_llm
    env = assisted().tool_env("http://127.0.0.1:4567", "gpt-x")
    assert env["OPENAI_BASE_URL"] == "http://127.0.0.1:4567/v1" and env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:4567"
    assert env["FMLBENCH_MODEL"] == "gpt-x" and {env["OPENAI_API_KEY"], env["ANTHROPIC_API_KEY"]} == {"fmlbench-placeholder"}
    assert human().tool_env(None, None) == {}
