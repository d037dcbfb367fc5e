"""How an agent's run ended, as the runner needs it: finished, stopped (with the reason), or failed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..safe_text import one_line
from .protocol import DoneArgs


@dataclass(frozen=True)
class AgentOutcome:
    kind: Literal["finished", "stopped", "failed"]
    # one line: why it stopped, what went wrong ("crashed: RuntimeError: policy bug"), or why it finished,
    # where the agent said ("agent ended")
    reason: str = ""
    detail: str = ""  # for the record: the traceback, or the end of the process's output
    # exceptions the agent caught in its main loop and went on from, as its port does (see agentkit.loop)
    caught: tuple[str, ...] = ()


def from_done(done: DoneArgs) -> AgentOutcome:
    """What the agent itself said in its last message."""
    caught = tuple(done.caught)
    if done.outcome in ("finished", "budget_exhausted"):
        # why it finished, when it says (a coding tool's 'agent ended': it stopped with steps left)
        return AgentOutcome("finished", one_line(done.reason), caught=caught)
    if done.outcome == "stopped":
        return AgentOutcome("stopped", one_line(done.reason), caught=caught)
    return AgentOutcome("failed", one_line(f"crashed: {done.error_type or 'an exception'}: {done.reason}"),
                        done.traceback, caught)
