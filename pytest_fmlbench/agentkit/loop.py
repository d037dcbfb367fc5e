"""What an exception inside an agent's main loop does: as its FML-bench port does, by default.

The ports of Autoresearch, AdaptiveSearch, OpenEvolve and AI Scientist v2 wrap their main loop in
``try: ... except Exception`` (autoresearch/agent.py 197-202, adaptivesearch 383-388, openevolve 855-860,
ai_scientist_v2 362-366): the loop ends there, and the run goes on to its final test on the best code so
far, as any finished run does. The AI Scientist (v1) port catches per idea (theaiscientist.py 299-310):
the idea ends, and the next one starts. AIDE and AIRA catch nothing: there an exception ends the run as
an error, here as there.

``caught_in_loop`` does what those ``except`` clauses do, and keeps the exception (where, type, message,
the end of its traceback) in ``session.caught``, which reaches the run's record (``caught_errors``), so
a finished run says what cut it short. With ``loop_error=crash`` (this project's earlier behaviour) the
exception ends the run as an error instead; the harness still tests the best code.

Never caught: the end of the budget, a stop (``RunStopped``), and the harness's own end of the
connection, which are not the agent's failures.
"""

from __future__ import annotations

import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal

from pydantic import Field

from ..agent_host.protocol import MAX_TRACEBACK_CHARS, ProtocolViolation
from ..agent_host.transport import HarnessGone
from ..session import BudgetExhausted, RunStopped, Session
from .base import AgentOptions

LoopError = Literal["final_test", "crash"]
_NOT_THE_AGENTS = (BudgetExhausted, RunStopped, HarnessGone, ProtocolViolation)


class LoopErrorOptions(AgentOptions):
    """The option of the agents whose port catches an exception in its main loop."""

    loop_error: LoopError = Field(
        "final_test", description="an exception in the main loop: 'final_test' = caught and recorded, the run "
        "goes on (to the final test on the best code so far; AI Scientist v1: to the next idea), as the port; "
        "'crash' = the run ends as an error (the best code is still tested)")


def describe(where: str, exc: BaseException) -> str:
    """'where: Type: message' and the end of the traceback, within what the record keeps of one."""
    head = f"{where}: {type(exc).__name__}: {exc}"
    trace = "".join(traceback.format_exception(exc, limit=-6))
    room = MAX_TRACEBACK_CHARS - len(head) - 1
    return head[:MAX_TRACEBACK_CHARS] if room <= 0 else f"{head}\n{trace[-room:]}"


@contextmanager
def caught_in_loop(session: Session, mode: LoopError, where: str) -> Iterator[None]:
    """Run the body; an exception it raises is caught and recorded (``mode='final_test'``) or raised."""
    try:
        yield
    except _NOT_THE_AGENTS:
        raise
    except Exception as exc:
        if mode == "crash":
            raise
        text = describe(where, exc)
        session.caught.append(text)
        session.log(f"[{where}] caught, as the port does: {text}")
