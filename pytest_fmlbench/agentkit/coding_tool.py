"""General coding agents (Claude Code, Codex CLI, mini-swe-agent) as benchmark agents: the shared driver.

A ``CodingToolAgent`` is an ordinary agent whose ``run`` executes in the agent sandbox. The harness lends
it a working copy of the workspace (``session.workdir``) and an LLM gateway socket (``session.gateway``),
because it declares it needs them. ``run``:

1. starts the forwarder (a loopback HTTP port relaying to the gateway socket: the tool's base URL), a
   socket serving ``fmlbench-validate``, and that command first on the tool's PATH;
2. builds the prompt (``tool_prompt``): the task, the files, the metric, the budget, the command, and on
   a resumed run what the recorded steps did;
3. runs the tool in the working copy, reading its output line by line into a transcript, until it
   exits or reaches its wall-clock budget;
4. makes each ``fmlbench-validate`` call one step: the editable files of the working copy are sent with
   ``set_files`` and validated with ``run_step``, whose ``extra`` keeps the transcript since the previous
   step and the other paths the tool changed (ignored); the tool reads the metric or the error's tail,
   the best so far and the steps left;
5. ends ``finished`` with the reason ``agent ended`` when the tool exits with steps left (a tool that
   stops early is a result, not an error), ``budget_exhausted`` when every step was used.

A subclass (one per tool) sets ``tool_name``, ``install_hint``, ``protocols`` and ``safe_flags``, and
implements ``tool_argv``, and where its tool needs it ``find_binary``, ``tool_env`` and
``transcript_event``.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any, ClassVar

from pydantic import Field, field_validator

from ..editor import Editor
from ..executor import scrubbed_env
from ..session import BudgetExhausted, RunStopped, Session, StepResult
from .base import Agent, AgentOptions
from .editing import run_error
from .tool_prompt import build_prompt
from .transcript import Transcript
from .validate_cmd import FAILED, NOT_RUN, SUCCEEDED
from .validate_server import COMMAND, ValidateServer
from .workdir_changes import changed, listed, scan

# the tool's share of the agent's own time budget kept back for starting and stopping it
_MARGIN_SHARE, _MAX_MARGIN_S = 0.1, 60.0
_STOP_GRACE_S = 5.0
_MAX_LINE_BYTES = 1 << 20
_STDERR_KEEP_BYTES = 8 << 10
_ERROR_TAIL_CHARS = 3000
_IGNORED_SHOWN = 20


class ToolError(RuntimeError):
    """The tool cannot be run, or ended without running a step: one line saying why."""


class ToolMissing(ToolError):
    """The tool is not installed here: the line says what to install, and there is no traceback to read."""


def tools_dir() -> Path:
    """Where the project's setup (``make tools``) installs the coding tools: ``.venv/tools``, read-only
    inside every sandbox as part of the interpreter's prefix."""
    return Path(sys.prefix) / "tools"


def parse_tool_args(text: str, safe_flags: dict[str, bool]) -> list[str]:
    """``text`` split as a shell would, every flag in ``safe_flags`` (flag -> takes a value); raises ValueError."""
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise ValueError(f"cannot be split into arguments: {exc}") from None
    allowed = ", ".join(sorted(safe_flags)) or "none"
    args, i = [], 0
    while i < len(words):
        word = words[i]
        flag, has_value, _ = word.partition("=")
        if flag not in safe_flags:
            raise ValueError(f"{word!r} is not a flag this tool may be given here; its safe flags: {allowed}")
        args.append(word)
        if safe_flags[flag] and not has_value:
            if i + 1 >= len(words):
                raise ValueError(f"{flag} needs a value")
            args.append(words[i + 1])
            i += 1
        elif not safe_flags[flag] and has_value:
            raise ValueError(f"{flag} takes no value")
        i += 1
    return args


class CodingToolOptions(AgentOptions):
    # flag -> whether it takes a value; set from the agent class's ``safe_flags``
    safe_flags: ClassVar[dict[str, bool]] = {}

    wall_clock_s: float | None = Field(
        None, gt=0, description="stop the tool after this many seconds, its validation runs included "
        "(default: the agent's own time budget, less a margin to stop it cleanly)")
    system_prompt: str = Field("", description="text added at the end of the task prompt")
    tool_args: str = Field("", description="extra flags for the tool, as on a command line; only its safe "
                           "flags are accepted")

    @field_validator("tool_args")
    @classmethod
    def _only_safe_flags(cls, value: str) -> str:
        parse_tool_args(value, cls.safe_flags)
        return value


def json_object(line: str) -> dict[str, Any] | None:
    """A line of a tool's output that is one JSON object, parsed; None for any other line."""
    try:
        data = json.loads(line)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def text_event(line: str) -> dict[str, Any]:
    """A line of a tool's output that is not one of its events, kept as text."""
    return {"type": "text", "text": line}


class CodingToolAgent(Agent):
    """Runs a general coding tool in a working copy of the workspace; each fmlbench-validate call is a step."""

    uses_llm = True
    needs_workdir = True
    needs_gateway = True
    Options = CodingToolOptions

    # -- what a subclass declares ------------------------------------------------------------------
    tool_name: ClassVar[str] = ""
    install_hint: ClassVar[str] = "run `make tools`, which installs the coding tools into .venv/tools"
    # the gateway protocols the tool speaks ("anthropic", "openai"); a provider speaking another is refused
    protocols: ClassVar[tuple[str, ...]] = ()
    # the tool's flags a user may add with --agent-opt tool_args=...: flag -> whether it takes a value
    safe_flags: ClassVar[dict[str, bool]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.Options.safe_flags != cls.safe_flags:
            # the options validate tool_args against this class's flags; named so that pickle finds it
            cls.Options = type(cls.Options.__name__, (cls.Options,), {
                "safe_flags": dict(cls.safe_flags), "__module__": cls.__module__,
                "__qualname__": f"{cls.__qualname__}.Options"})

    def __init__(self, options: CodingToolOptions | None = None):
        super().__init__(options)
        # set by run() before tool_argv and tool_env are called
        self.binary = ""
        self.home = Path()
        self.workdir = Path()
        self.extra_args = parse_tool_args(self.options.tool_args, type(self).safe_flags)

    # -- hooks -------------------------------------------------------------------------------------
    def find_binary(self) -> str:
        """The tool's executable; raises ToolError, one line saying how to install it, when it is missing."""
        found = shutil.which(self.tool_name)
        if found is None:
            raise self.missing(f"no {self.tool_name} on PATH")
        return found

    def tool_argv(self, prompt: str, model: str | None) -> list[str]:
        """The command that runs the tool on ``prompt`` non-interactively (``self.binary`` is found by then;
        put ``self.extra_args`` where the tool takes its flags). ``model``: the gateway's model, or None."""
        raise NotImplementedError(f"{type(self).__name__} must implement tool_argv(prompt, model)")

    def tool_env(self, base_url: str | None, model: str | None) -> dict[str, str]:
        """Variables for the tool on top of its environment (no key: the gateway adds it; ``self.home`` is
        its private home). ``base_url``: the forwarder's loopback URL, None without a gateway."""
        return {}

    def transcript_event(self, line: str) -> dict[str, Any] | None:
        """One line of the tool's output as a transcript event, or None to leave it out. By default a JSON
        object line is kept as it is, anything else as text."""
        event = json_object(line)
        return event if event is not None else text_event(line)

    def missing(self, looked: str) -> ToolMissing:
        """The one-line error for a tool that is not installed."""
        return ToolMissing(f"{self.label} is not installed here ({looked}): {self.install_hint}")

    @property
    def label(self) -> str:
        return self.tool_name or type(self).__name__

    # -- the run -----------------------------------------------------------------------------------
    def run(self, session: Session) -> None:
        workdir = self._check_lent(session)
        if session.steps_left <= 0:
            raise BudgetExhausted(f"all {session.steps_total} steps used")
        self.binary = self.find_binary()
        self.workdir = Path(workdir)
        scratch = Path(tempfile.mkdtemp(prefix="fmlbench-tool-"))
        self.home = scratch / "home"
        self.home.mkdir()
        self._session = session
        self._transcript = Transcript()
        self._step_lock = threading.Lock()
        self._halt = threading.Event()
        self._stopped: str | None = None
        self._failure: BaseException | None = None
        self._steps_run = 0
        self._editable = set(session.task.editable)
        self._initial, _ = scan(self.workdir, self._editable)
        stop_forwarder = server = None
        try:
            base_url = None
            if session.gateway is not None:
                base_url, stop_forwarder = self._start_forwarder(session.gateway["socket"])
            server = ValidateServer(scratch, self._validate)
            bin_dir = scratch / "bin"
            server.write_command(bin_dir)
            model = session.gateway["model"] if session.gateway is not None else None
            argv = self.tool_argv(build_prompt(session, workdir, self.options.system_prompt), model)
            env = self._environment(scratch, bin_dir, base_url, model)
            how, code, stderr_tail = self._drive(argv, env, self._wall_clock(session))
        finally:
            if server is not None:
                server.close()  # waits for a step still running
            if stop_forwarder is not None:
                stop_forwarder()
            shutil.rmtree(scratch, ignore_errors=True)
        self._finish(session, how, code, stderr_tail)

    def _check_lent(self, session: Session) -> str:
        """What the harness lent, checked before anything runs; returns the working copy's path."""
        name = self.label
        if session.workdir is None:
            raise ToolError(f"{name} needs a working copy of the workspace, which the harness lends only to an "
                            "agent class that declares needs_workdir = True")
        if type(self).needs_gateway:
            if session.gateway is None:
                raise ToolError(f"{name} needs the harness's LLM gateway, which it lends only to an agent class "
                                "that declares needs_gateway = True, in a run with --model")
            protocol = session.gateway["protocol"]
            if self.protocols and protocol not in self.protocols:
                provider = session.llm.provider if session.llm is not None else "this provider"
                raise ToolError(f"{name} speaks the {' or '.join(self.protocols)} API, but --provider={provider} "
                                f"speaks the {protocol} API; pick a provider whose API it speaks")
        return session.workdir

    def _start_forwarder(self, socket_path: str):
        from .forwarder import start_forwarder  # a loopback port inside the sandbox, relaying to the gateway

        return start_forwarder(socket_path)

    def _wall_clock(self, session: Session) -> float:
        if self.options.wall_clock_s is not None:
            return self.options.wall_clock_s
        budget = session.time_budget_s
        if budget is None:
            budget = 600.0 + session.steps_total * session.task.timeout_s
        # the agent's own time never runs faster than the wall clock: stopping the tool a margin before its
        # budget ends the run cleanly instead of having the agent's process killed
        return max(1.0, budget - min(_MAX_MARGIN_S, _MARGIN_SHARE * budget))

    def _environment(self, scratch: Path, bin_dir: Path, base_url: str | None, model: str | None) -> dict[str, str]:
        # the tool's configuration and caches stay in its private home, never the user's
        env = scrubbed_env(base=dict(os.environ))
        tmp = scratch / "tmp"
        tmp.mkdir()
        env.update(HOME=str(self.home), TMPDIR=str(tmp), XDG_CONFIG_HOME=str(self.home / ".config"),
                   XDG_CACHE_HOME=str(self.home / ".cache"), XDG_DATA_HOME=str(self.home / ".local" / "share"))
        env.update(self.tool_env(base_url, model))
        env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH') or os.defpath}"
        return env

    def _drive(self, argv: list[str], env: dict[str, str], wall_clock_s: float) -> tuple[str, int | None, str]:
        """Run the tool until it exits, its wall clock ends or a step halts it: (how, exit code, stderr tail)."""
        self._session.log(f"{self.label}: starting {argv[0]} in {self.workdir} (wall clock {wall_clock_s:g} s)")
        try:
            proc = subprocess.Popen(argv, cwd=self.workdir, env=env, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        except OSError as exc:
            raise ToolError(f"{self.label} could not start ({argv[0]}): {exc.strerror or exc}") from None
        stderr_tail: deque[bytes] = deque()
        readers = [threading.Thread(target=self._read_output, args=(proc.stdout,), daemon=True),
                   threading.Thread(target=_keep_tail, args=(proc.stderr, stderr_tail), daemon=True)]
        for reader in readers:
            reader.start()
        deadline = time.monotonic() + wall_clock_s
        how = "exited"
        while proc.poll() is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                how = "wall clock"
                break
            if self._halt.wait(min(remaining, 0.25)):
                how = "halted"
                break
        if proc.poll() is None:
            _stop(proc)
        for reader in readers:
            # a process that left the tool's group may hold its pipes open: its output is not waited for
            reader.join(timeout=_STOP_GRACE_S)
        return how, proc.returncode, b"".join(stderr_tail).decode(errors="replace")

    def _read_output(self, stream) -> None:
        for raw in iter(lambda: stream.readline(_MAX_LINE_BYTES), b""):
            line = raw.decode(errors="replace").rstrip("\r\n")
            if not line.strip():
                continue
            try:
                event = self.transcript_event(line)
            except Exception as exc:  # a parser's bug must not stop the tool's output from being read
                event = {"type": "text", "text": line, "parse_error": f"{type(exc).__name__}: {exc}"}
            if event is not None:
                self._transcript.add(event)

    # -- fmlbench-validate -------------------------------------------------------------------------
    def _validate(self, args: list[str]) -> tuple[str, int]:
        """One call of the command, served in the validate server's thread."""
        try:
            with self._step_lock:
                return self._step(args)
        except BudgetExhausted:
            return self._spent(), NOT_RUN
        except RunStopped as exc:
            self._stopped = str(exc)
            self._halt.set()
            return f"{COMMAND}: the run was stopped ({exc}); nothing was run\n", NOT_RUN
        except Exception as exc:  # the harness is gone, or broke the protocol: the driver fails with it
            self._failure = exc
            self._halt.set()
            return f"{COMMAND}: the benchmark failed ({type(exc).__name__}); nothing was run\n", NOT_RUN

    def _step(self, args: list[str]) -> tuple[str, int]:
        session = self._session
        if session.steps_left <= 0:
            return self._spent(), NOT_RUN
        edit = session.set_files(Editor(self.workdir, session.task.editable).read())
        if not edit.applied:
            return (f"{COMMAND}: not run: {edit.error}\nNo step was used; steps left: {session.steps_left}.\n",
                    NOT_RUN)
        now, truncated = scan(self.workdir, self._editable)
        ignored = listed(changed(self._initial, now), truncated)
        result = session.run_step("validate", plan=" ".join(args).strip(), edit=edit,
                                  extra={"transcript": self._transcript.take(), "ignored_changes": ignored})
        self._steps_run += 1
        return self._report(result, ignored), SUCCEEDED if result.success else FAILED

    def _report(self, result: StepResult, ignored: list[str]) -> str:
        session, metric = self._session, self._session.task.metric
        if result.success:
            lines = [f"step {result.step} of {session.steps_total}: {metric.key} = {result.metric:.6g} "
                     f"({metric.direction} is better)"]
        else:
            error = run_error(session.journal.get(result.step)) or result.error
            if len(error) > _ERROR_TAIL_CHARS:
                error = "[...]\n" + error[-_ERROR_TAIL_CHARS:]
            lines = [f"step {result.step} of {session.steps_total} failed:", error.rstrip()]
        lines.append(self._best_line(result.step))
        if ignored:
            shown = ", ".join(ignored[:_IGNORED_SHOWN]) + (", ..." if len(ignored) > _IGNORED_SHOWN else "")
            lines.append(f"ignored (changed, but not an editable file): {shown}")
        left = session.steps_left
        lines.append(f"steps left: {left}" + (" (the step budget is spent)" if left == 0 else ""))
        return "\n".join(lines) + "\n"

    def _best_line(self, this_step: int | None = None) -> str:
        best = self._session.best
        if best is None:
            return "best so far: none (no step has succeeded)"
        mark = " (this step)" if best.step == this_step else ""
        return f"best so far: step {best.step}{mark}, {self._session.task.metric.key} = {best.metric:.6g}"

    def _spent(self) -> str:
        total = self._session.steps_total
        return (f"{COMMAND}: the step budget is spent (all {total} steps used); nothing was run.\n"
                f"{self._best_line()}\n")

    # -- the end -----------------------------------------------------------------------------------
    def _finish(self, session: Session, how: str, code: int | None, stderr_tail: str) -> None:
        if self._failure is not None:
            raise self._failure
        if self._stopped is not None:
            raise RunStopped(self._stopped)
        exit_text = _describe_exit(code) if how == "exited" else f"stopped at its wall clock ({_describe_exit(code)})"
        session.log(f"{self.label}: {exit_text}; {self._steps_run} step(s) in this session")
        if stderr_tail.strip():
            session.log(f"{self.label} stderr (end):\n{stderr_tail.rstrip()}")
        events = self._transcript.take()
        if len(session.journal):
            # what the tool did after its last step (its closing words, its usage report) joins that step
            session.annotate(session.journal.nodes[-1].step, extra={"transcript_end": events, "tool_exit": exit_text})
        if how == "exited" and code != 0 and self._steps_run == 0:
            last = stderr_tail.strip().splitlines()
            raise ToolError(f"{self.label} {exit_text} before its first {COMMAND}"
                            + (f": {last[-1][:300]}" if last else ""))
        if session.steps_left <= 0:
            raise BudgetExhausted(f"all {session.steps_total} steps used")
        self.end_reason = "agent ended" if how == "exited" else "wall-clock budget reached"


def _keep_tail(stream, kept: deque[bytes]) -> None:
    size = 0
    for chunk in iter(lambda: stream.read1(1 << 14), b""):
        kept.append(chunk)
        size += len(chunk)
        while size > _STDERR_KEEP_BYTES and len(kept) > 1:
            size -= len(kept.popleft())


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM to the tool's process group, then SIGKILL to whatever of the group is left after a grace period."""
    _signal_group(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=_STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        pass
    _signal_group(proc.pid, signal.SIGKILL)
    proc.wait()


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with code {code}"
