"""pytest-fmlbench: FML-bench (ML research agents on fundamental ML problems) as a pytest plugin.

The public API for writing agents: subclass :class:`Agent`, act on the :class:`Session` it is given.
"""

from .agents.base import Agent, AgentOptions
from .editor import EditResult, SearchReplace, WholeFile
from .journal import Journal
from .record import RunRecord, StepRecord, Usage
from .session import BudgetExhausted, RunStopped, Session, StepResult
from .spec import TaskSpec

__all__ = [
    "Agent", "AgentOptions", "BudgetExhausted", "EditResult", "Journal", "RunRecord", "RunStopped",
    "SearchReplace", "Session", "StepRecord", "StepResult", "TaskSpec", "Usage", "WholeFile",
]
