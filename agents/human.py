"""A person as the agent: a human baseline, worked in the same sandbox and under the same budget as the
coding agents, and recorded as one.

The run lends this agent the working copy a coding tool gets (``/workspace``, protected files read-only;
no ``harness/``, no private data, no keys, no network). Instead of a tool, the driver starts a tmux server
there (``agentkit.human_terminal``) with a bash shell in the working copy, and waits for a person to
attach to it from another terminal with ``fmlbench attach``. In the shell, ``fmlbench-validate`` spends a
step exactly as it does for a coding tool, ``fmlbench-status`` says where the run stands and
``fmlbench-submit`` ends the session. The session also ends at the agent's wall clock (``--agent-timeout``);
either way the harness then tests the best validated code, as for any agent.

Each step's transcript holds the shell's commands and (capped) output since the previous step, and an
``activity`` event with the person's active time so far and the rule it is counted by.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any, ClassVar

from pydantic import Field

from pytest_fmlbench.agentkit.base import AgentOptions
from pytest_fmlbench.agentkit.coding_tool import CodingToolAgent, ToolError
from pytest_fmlbench.agentkit.human_cmd import write_commands
from pytest_fmlbench.agentkit.human_sessions import beacon_json
from pytest_fmlbench.agentkit.human_terminal import (
    BEACON_NAME, DEFAULT_IDLE_GAP_S, POLL_S, ActiveTime, Terminal, idle_rule,
)
from pytest_fmlbench.agentkit.validate_cmd import NOT_RUN, SUCCEEDED
from pytest_fmlbench.agentkit.validate_server import ValidateServer

PLACEHOLDER_KEY = "fmlbench-placeholder"
SUBMITTED = "submitted by the person"
# reminders on the status line this many seconds before the wall clock ends the session
_WARN_AT_S = (600.0, 120.0)
_STATUS_EVERY_S = 5.0
_SUBMIT_LOG_WAIT_S = 2.0
# kept back from the agent's own time budget to end the session cleanly
_MIN_MARGIN_S, _MAX_MARGIN_S = 5.0, 60.0


class HumanOptions(AgentOptions):
    # a coding tool's flags and prompt additions mean nothing to a person: the driver reads them as empty
    safe_flags: ClassVar[dict[str, bool]] = {}
    tool_args: ClassVar[str] = ""
    system_prompt: ClassVar[str] = ""

    wall_clock_s: float | None = Field(
        None, gt=0, description="end the session after this many seconds, validation runs included (default: the "
        "agent's own time budget, --agent-timeout, less a margin to end it cleanly)")
    idle_gap_s: float = Field(DEFAULT_IDLE_GAP_S, gt=0, description="a gap between key presses longer than this "
                              "(seconds) is idle: it adds nothing to the person's active time")


def attach_hint(task_id: str) -> str:
    """The line a run of this agent shows: what the person runs, in another terminal."""
    return (f"waiting for a person: run `fmlbench attach {task_id}` in another terminal (detach: C-b d or "
            "fmlbench-detach; end: fmlbench-submit)")


class HumanAgent(CodingToolAgent):
    """A person works the task in a shell in the coding agents' sandbox (`fmlbench attach`): a human baseline."""

    name = "human"
    tool_name = "tmux"
    install_hint = "install tmux (Debian/Ubuntu: apt-get install tmux; Fedora: dnf install tmux)"
    uses_llm = False
    needs_gateway = False
    Options = HumanOptions

    attach_hint = staticmethod(attach_hint)

    def __init__(self, options: HumanOptions | None = None):
        super().__init__(options)
        self._submitted = threading.Event()
        self._collect_lock = threading.Lock()
        self._activity = ActiveTime(self.options.idle_gap_s)
        self._terminal: Terminal | None = None
        self._started = time.monotonic()
        self._wall_clock_s = 0.0
        self._prompt = ""

    # -- what CodingToolAgent asks of a tool -------------------------------------------------------
    def tool_argv(self, prompt: str, model: str | None) -> list[str]:
        self._prompt = prompt
        return [self.binary]

    def tool_env(self, base_url: str | None, model: str | None) -> dict[str, str]:
        if not base_url:
            return {}
        # a lent gateway: the person's own tools reach the run's model through it (the gateway adds the key)
        return {"OPENAI_BASE_URL": base_url.rstrip("/") + "/v1", "ANTHROPIC_BASE_URL": base_url,
                "OPENAI_API_KEY": PLACEHOLDER_KEY, "ANTHROPIC_API_KEY": PLACEHOLDER_KEY,
                "FMLBENCH_MODEL": model or ""}

    def _wall_clock(self, session) -> float:
        if self.options.wall_clock_s is not None or session.time_budget_s is None:
            return super()._wall_clock(session)
        # ending the session (the shell, its programs, the transcript) takes a few seconds, whatever the budget
        budget = session.time_budget_s
        return max(1.0, budget - min(_MAX_MARGIN_S, max(_MIN_MARGIN_S, 0.1 * budget), budget / 2))

    # -- the session -------------------------------------------------------------------------------
    def _drive(self, argv: list[str], env: dict[str, str], wall_clock_s: float) -> tuple[str, int | None, str]:
        session = self._session
        scratch = self.home.parent
        bin_dir = Path(env["PATH"].split(os.pathsep)[0])  # where the run put fmlbench-validate
        control_dir, terminal_dir = scratch / "control", scratch / "terminal"
        control_dir.mkdir()
        terminal_dir.mkdir()
        control = ValidateServer(control_dir, self._control)
        write_commands(bin_dir, control.path, self.binary)
        (self.home / "TASK.md").write_text(self._prompt)
        self._started, self._wall_clock_s = time.monotonic(), wall_clock_s
        terminal = Terminal(self.binary, terminal_dir, env, self.workdir, self._banner())
        how, code = "exited", 0
        try:
            try:
                terminal.start()
            except (RuntimeError, OSError) as exc:
                raise ToolError(f"the person's terminal could not start: {exc}") from None
            self._terminal = terminal
            (terminal_dir / BEACON_NAME).write_text(beacon_json(session.task.id, session.steps_total, time.time(),
                                                                wall_clock_s, str(terminal.socket)))
            self._transcript.add({"type": "start", "tool": "human", "prompt": self._prompt,
                                  "wall_clock_s": wall_clock_s, "rule": idle_rule(self._activity.idle_gap_s)})
            session.log(f"human: {attach_hint(session.task.id)}; wall clock {wall_clock_s:g} s")
            how = self._wait(terminal)
            if self._submitted.is_set():
                self._await_submit_logged(terminal)
            if how == "wall clock":
                terminal.say("fmlbench: the time budget is spent; the session ends, and your best step is tested")
        finally:
            with self._collect_lock:
                self._collect(terminal)
                self._flush_output(terminal)
                self._transcript.add(self._activity_event())
            status = terminal.stop()
            control.close()
        if how == "server gone":
            session.log(f"human: the session's tmux server ended on its own (exit status {status})")
            how = "exited"
        return how, code, ""

    def _wait(self, terminal: Terminal) -> str:
        deadline = self._started + self._wall_clock_s
        warned = set()
        status_at = 0.0
        while True:
            if self._submitted.is_set():
                return "exited"
            if self._halt.is_set():
                return "halted"
            if not terminal.alive():
                return "server gone"
            now = time.monotonic()
            if now >= deadline:
                return "wall clock"
            with self._collect_lock:
                self._collect(terminal)
            for before in _WARN_AT_S:
                if deadline - now <= before and before not in warned:
                    warned.add(before)
                    terminal.say(f"fmlbench: {_clock(deadline - now)} left before the session ends")
            if now >= status_at:
                status_at = now + _STATUS_EVERY_S
                terminal.set_status(self._status_line(deadline - now))
            self._submitted.wait(POLL_S)

    def _await_submit_logged(self, terminal: Terminal) -> None:
        """The shell logs a command at its next prompt, once fmlbench-submit has printed its answer: wait briefly
        for that, so that the transcript ends with it."""
        deadline = time.monotonic() + _SUBMIT_LOG_WAIT_S
        while time.monotonic() < deadline:
            with self._collect_lock:
                commands = terminal.new_commands()
                if commands:
                    self._flush_output(terminal)
                    for command in commands:
                        self._transcript.add(command)
                if any("fmlbench-submit" in c["command"] for c in commands):
                    return
            time.sleep(0.1)

    def _collect(self, terminal: Terminal) -> None:
        """Key presses into the active time; finished commands (with the output before them) into the transcript."""
        pressed = terminal.last_key_press()
        if pressed is not None:
            self._activity.saw(pressed)
        commands = terminal.new_commands()
        if commands:
            self._flush_output(terminal)
            for command in commands:
                self._transcript.add(command)

    def _flush_output(self, terminal: Terminal) -> None:
        output = terminal.take_output()
        if output.strip():
            self._transcript.add({"type": "output", "text": output})

    def _activity_event(self) -> dict[str, Any]:
        session_s = round(time.monotonic() - self._started, 1)
        # key presses are known to the second (tmux's session_activity): their gaps may add up to a little more
        # than the session's own clock, which bounds them
        return {"type": "activity", "active_s": min(round(self._activity.active_s, 1), session_s),
                "session_s": session_s, "rule": idle_rule(self._activity.idle_gap_s)}

    def _step(self, args: list[str]) -> tuple[str, int]:
        # what the shell did up to this call is this step's transcript
        terminal = self._terminal
        if terminal is not None:
            with self._collect_lock:
                self._collect(terminal)
                self._flush_output(terminal)
                self._transcript.add(self._activity_event())
        return super()._step(args)

    # -- fmlbench-status, fmlbench-submit ------------------------------------------------------------
    def _control(self, args: list[str]) -> tuple[str, int]:
        action = args[0] if args else ""
        if action == "status":
            return self._status_text(), SUCCEEDED
        if action == "submit":
            self._submitted.set()
            best = self._session.best
            tested = (f"step {best.step}'s code ({self._session.task.metric.key} = {best.metric:.6g} on validation)"
                      if best is not None else "the baseline code (no step succeeded)")
            return f"fmlbench-submit: the session ends now; the benchmark tests {tested}.\n", SUCCEEDED
        return f"fmlbench: unknown action {action!r}\n", NOT_RUN

    def _status_text(self) -> str:
        session = self._session
        elapsed = time.monotonic() - self._started
        return "\n".join([
            f"task: {session.task.id}",
            f"steps: {session.steps_used} used, {session.steps_left} left of {session.steps_total}",
            self._best_line(),
            f"time: {_clock(elapsed)} used, {_clock(max(0.0, self._wall_clock_s - elapsed))} left on the clock",
            f"active: {_clock(self._activity.active_s)} ({idle_rule(self._activity.idle_gap_s)})",
        ]) + "\n"

    def _status_line(self, left_s: float) -> str:
        session, best = self._session, self._session.best
        shown = "none" if best is None else f"{best.metric:.4g}"
        return f"steps left {session.steps_left}/{session.steps_total} | best {shown} | {_clock(left_s)} left"

    def _banner(self) -> str:
        session = self._session
        return "\n".join([
            f"fmlbench: a human baseline on {session.task.id} ({session.steps_left} of {session.steps_total} steps left, "
            f"{_clock(self._wall_clock_s)} on the clock).",
            "Your working copy is this folder. The task, as the coding agents get it: less ~/TASK.md",
            "  fmlbench-validate [NOTE]   one step: validates the editable files as they are now",
            "  fmlbench-status            steps left, best so far, time used",
            "  fmlbench-submit            end now; the benchmark tests the code of your best validated step",
            "  fmlbench-detach (C-b d)    leave; `fmlbench attach` brings you back to this very shell",
            "Recorded: your commands and their output, and your " + idle_rule(self._activity.idle_gap_s) + ".",
            "",
        ]) + "\n"

    # -- the end -----------------------------------------------------------------------------------
    def _finish(self, session, how: str, code: int | None, stderr_tail: str) -> None:
        super()._finish(session, how, code, stderr_tail)
        if self._submitted.is_set():
            self.end_reason = SUBMITTED


def _clock(seconds: float) -> str:
    seconds = int(max(0.0, seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}h{rest // 60:02d}m" if hours else f"{rest // 60}m{rest % 60:02d}s"

