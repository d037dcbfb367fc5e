"""The unmodified baseline: one validation run of the task's own code, then the final test."""

from __future__ import annotations

from pytest_fmlbench.agentkit import Agent
from pytest_fmlbench.session import Session


class BaselineAgent(Agent):
    """Runs the task's baseline code once, unchanged: the reference every agent is scored against."""

    name = "baseline"

    def run(self, session: Session) -> None:
        session.run_step("baseline", plan="run the task's baseline code unchanged")
