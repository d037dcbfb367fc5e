"""Running an agent against a run: in its own sandboxed process (the default), in the harness's process
(``--agent-in-process``, for debuggers), or as any program on a UNIX socket (``--agent=external``).

All three go through the same protocol and dispatcher; they differ only in where ``run`` executes.
Whatever goes wrong while the agent runs ends as an ``AgentOutcome`` of kind ``failed`` with one line, so
that the best code so far still gets its final test: the agent's own failures (a crash, a broken protocol,
a limit), and the harness's failures while serving its requests (an edit the editor cannot take). Only an
integrity violation and a broken sandbox propagate: no code is tested then.
"""

from __future__ import annotations

import functools
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from ..harness_session import HarnessSession
from ..isolation import SandboxUnavailable
from ..session import Session
from ..spec import Task
from ..workspace import IntegrityViolation
from . import external
from .child import run_agent
from .launcher import OUTPUT_LIMIT_BYTES, AgentLimits, AgentProcess
from .lent import Lent
from .locate import AgentLocator
from .needs import AgentNeeds
from .outcome import AgentOutcome, from_done, one_line
from .protocol import ProtocolViolation, RequestError
from .serve import BROKE_PROTOCOL, CLOSED, EXITED, FLOODED, LIMIT, TIMED_OUT, Ended, serve
from .server import Dispatcher
from .transport import LocalTransport, hello

AgentMode = Literal["process", "in process", "external"]
# the agent's own time beyond what its steps may take, and per step on top of the task's timeout
_BASE_BUDGET_S = 600.0


def own_time_budget(agent_limits: AgentLimits, task: Task, steps: int) -> float:
    """The agent's own wall-clock budget: the time the harness spends on its requests is not counted."""
    if agent_limits.timeout_s is not None:
        return agent_limits.timeout_s
    return _BASE_BUDGET_S + steps * task.spec.timeout_s


# what ends a run without its final test: the code cannot be trusted, or cannot be run safely
UNTESTABLE = (IntegrityViolation, SandboxUnavailable)


def _whatever_ends_it_is_an_outcome(drive_agent: Callable[..., AgentOutcome]) -> Callable[..., AgentOutcome]:
    """Turns every failure but an integrity violation or a broken sandbox into a ``failed`` outcome."""

    @functools.wraps(drive_agent)
    def contained(**kwargs: Any) -> AgentOutcome:
        try:
            return drive_agent(**kwargs)
        except UNTESTABLE:
            raise
        except (ProtocolViolation, RequestError) as exc:
            # an agent in the harness's process whose last message ('done') the harness refused
            return AgentOutcome("failed", one_line(f"broke the protocol ({exc})"))
        except Exception as exc:
            detail = "".join(traceback.format_exception(exc, limit=-6))[-4000:]
            return AgentOutcome("failed", one_line(f"was ended by a failure of the harness "
                                                   f"({type(exc).__name__}: {exc})"), detail)

    return contained


@_whatever_ends_it_is_an_outcome
def drive(*, mode: AgentMode, session: HarnessSession, llm: Any, task: Task, steps: int, agent_cls: Any = None,
          agent_options: Any = None, locator: AgentLocator | None = None, sandboxed: bool = True,
          agent_limits: AgentLimits = AgentLimits(), hidden: list[Path] = (), log_dir: Path,
          announce: Callable[[str], None], needs: AgentNeeds = AgentNeeds(),
          gateway_factory: Callable[[Any, Path], Any] | None = None) -> AgentOutcome:
    """Run the agent until it is done or fails; raises only an integrity violation or a broken sandbox."""
    payload = None
    if mode == "process":
        payload = {"locator": locator.to_json(), "options": agent_options.model_dump(mode="json")}
    if needs.workdir:
        # its working copy holds the files of the last recorded step: it goes on from there, not replaying
        session.keep_recorded_steps()
    in_sandbox = mode == "process" and sandboxed
    lent = Lent.open(needs, session, llm, sandboxed=in_sandbox, hidden=list(hidden), gateway_factory=gateway_factory)
    if getattr(agent_cls, "attach_hint", None) is not None:  # --agent=human: the command the person runs
        announce(agent_cls.attach_hint(task.id))
    try:
        budget = own_time_budget(agent_limits, task, steps)
        dispatcher = Dispatcher(session, llm, agent=payload, lent=lent.hello_fields(), time_budget_s=budget)
        if mode == "in process":
            outcome = _in_process(dispatcher, agent_cls(agent_options))
        elif mode == "external":
            outcome = external.serve_one(dispatcher, task.id, budget, announce)
        else:
            proc = AgentProcess("run", sandboxed=sandboxed, code=[Path(c) for c in locator.code],
                                hidden=list(hidden), hide_data=tuple(task.spec.sandbox.hide),
                                agent_limits=agent_limits, log_path=agent_log(log_dir, session), lent=lent.binds())
            outcome = _own_process(proc, dispatcher, budget)
        if dispatcher.fatal is not None:
            raise dispatcher.fatal
        tool_stop = lent.stop_reason()
        stop_reason = dispatcher.stop_reason or tool_stop
    finally:
        lent.close()
    if stop_reason and outcome.kind == "finished":
        # an agent that caught the budget's RunStopped (or whose tool met the gateway's refusal) and said it
        # finished was still stopped by it
        return AgentOutcome("stopped", stop_reason)
    if tool_stop and outcome.kind == "failed":
        # a tool that gives up at the gateway's refusal (Claude Code exits 1 at a 403) was stopped by the
        # budget, also before its first step; how it ended stays in the record's detail
        return AgentOutcome("stopped", tool_stop, outcome.detail or outcome.reason, outcome.caught)
    return outcome


def _in_process(dispatcher: Dispatcher, agent) -> AgentOutcome:
    transport = LocalTransport(dispatcher)
    session = Session(transport, hello(transport))
    transport.request("done", run_agent(agent, session))
    return from_done(dispatcher.done)


def _own_process(proc: AgentProcess, dispatcher: Dispatcher, budget: float) -> AgentOutcome:
    try:
        serve(proc.conn, dispatcher, budget, proc)
    except Ended as ended:
        proc.close(grace_s=2.0 if ended.kind in (CLOSED, EXITED) else 0.0)
        return AgentOutcome("failed", _process_failure(ended, proc, budget), proc.output_tail())
    except BaseException:
        proc.close(grace_s=0.0)
        raise
    proc.close()
    return from_done(dispatcher.done)


def _process_failure(ended: Ended, proc: AgentProcess, budget: float) -> str:
    # what the process ran into explains its end better than the closed socket it left
    limit = proc.limit()
    if proc.flooded or ended.kind == FLOODED:
        return f"flooded its output (more than {OUTPUT_LIMIT_BYTES >> 20} MiB); its process was killed"
    if limit or ended.kind == LIMIT:
        held = (f"{proc.limits.memory_bytes() >> 20} MB" if limit == "out of memory"
                else f"{proc.limits.max_processes} processes")
        return f"hit a limit of its process: {limit or 'a resource limit'} (its limit: {held}); it was killed"
    if ended.kind == TIMED_OUT:
        return (f"exceeded its time budget of {budget:g} s (its own time, steps and model calls not counted; "
                "--agent-timeout sets it); its process was killed")
    if ended.kind == BROKE_PROTOCOL:
        return f"broke the protocol ({ended}); its process was killed"
    return f"process ended before the agent said it was done ({proc.exit_description()})"


def agent_log(log_dir: Path, session: HarnessSession) -> Path:
    """The log of the agent's own process (its output, and the traceback where it crashed)."""
    resumed = session.resumed_after
    return log_dir / (f"agent_after_step_{resumed:04d}.log" if resumed else "agent.log")
