"""The unmodified baseline: one validation run of the task's own code, then the final test."""

from __future__ import annotations

from ..session import Session
from .base import Agent


class BaselineAgent(Agent):
    name = "baseline"

    def run(self, session: Session) -> None:
        session.run_step("baseline", plan="run the task's baseline code unchanged")
