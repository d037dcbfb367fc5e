"""pytest-fmlbench: FML-bench (ML research agents on fundamental ML problems) as a pytest plugin.

The public API for writing agents: subclass :class:`Agent`, act on the :class:`Session` it is given.
Names are imported on first use, so task harness scripts that only need ``pytest_fmlbench.evalkit``
start without loading the harness machinery.
"""

from importlib import import_module

_PUBLIC = {
    "Agent": "agentkit.base", "AgentOptions": "agentkit.base",
    "EditResult": "editor", "SearchReplace": "editor", "WholeFile": "editor",
    "Journal": "journal",
    "RunRecord": "record", "StepRecord": "record", "Usage": "record",
    "BudgetExhausted": "stops", "RunStopped": "stops", "Session": "session", "StepResult": "session",
    "TaskSpec": "spec",
}

__all__ = sorted(_PUBLIC)


def __getattr__(name: str):
    if name in _PUBLIC:
        return getattr(import_module(f".{_PUBLIC[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
