"""The interface every research agent implements, built-in or brought by a user."""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, ConfigDict

from ..session import Session


class AgentOptions(BaseModel):
    """Subclass this to declare an agent's options; ``--agent-opt name=value`` sets them."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class Agent:
    """A research agent: a policy that spends the step budget through ``session.run_step``.

    ``run`` edits the editable files (``session.edit`` / ``session.set_files``) and calls
    ``session.run_step(action=...)`` once per validation run. It returns when it is done, or lets
    ``BudgetExhausted`` propagate. The harness tracks the best step and runs the final test itself.

    The first line of a subclass's docstring is its one-line summary in ``fmlbench agents``.
    """

    name: ClassVar[str] = ""
    Options: ClassVar[type[AgentOptions]] = AgentOptions
    # agents that need --model and an LLM provider say so; the harness then builds session.llm
    uses_llm: ClassVar[bool] = False
    # an agent that drives a program of its own (a coding tool) asks the harness for a working copy of the
    # workspace, bound into its sandbox (``session.workdir``), and for an LLM gateway on a UNIX socket
    # (``session.gateway``) that makes the program's model calls with the run's key, budget and records
    needs_workdir: ClassVar[bool] = False
    needs_gateway: ClassVar[bool] = False
    # why ``run`` returned, where the agent has something to say: recorded with the finished run and shown
    # in the tables' notes (a coding tool that stopped with steps left sets 'agent ended')
    end_reason: str = ""

    def __init__(self, options: AgentOptions | None = None):
        self.options = options if options is not None else self.Options()

    def run(self, session: Session) -> None:  # pragma: no cover - the interface itself
        raise NotImplementedError(f"{type(self).__name__} must implement run(session)")
