"""Compare two benchmark sessions and gate on regressions.

* :mod:`.sides`: one side of a comparison (a folder of runs, scored as ``fmlbench score`` does);
* :mod:`.sessions`: saved sessions under ``<out>/sessions/`` and the references that name them;
* :mod:`.diff`: paired deltas of NI and the test value, mean ± SEM over seeds, the noise rule;
* :mod:`.table`: terminal table, CSV, JSON; :mod:`.gate`: the pytest side (save, compare, fail).
"""

from __future__ import annotations

import importlib

# name -> the module that defines it: pytest loads this package with the plugin in every session and every
# xdist worker, and the comparison's modules need pandas, which only a session that compares (or reports)
# should pay for
_HOMES = {"RULE": "diff", "Comparison": "diff", "TaskComparison": "diff", "compare": "diff",
          "SavedSession": "sessions", "resolve": "sessions", "side_for": "sessions",
          "CompareInputError": "sides", "Side": "sides"}
__all__ = sorted(_HOMES)


def __getattr__(name: str):
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{_HOMES[name]}", __name__), name)
