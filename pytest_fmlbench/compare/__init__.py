"""Compare two benchmark sessions and gate on regressions.

* :mod:`.sides`: one side of a comparison (a folder of runs, scored as ``fmlbench score`` does);
* :mod:`.sessions`: saved sessions under ``<out>/sessions/`` and the references that name them;
* :mod:`.diff`: paired deltas of NI and the test value, mean ± SEM over seeds, the noise rule;
* :mod:`.table`: terminal table, CSV, JSON; :mod:`.gate`: the pytest side (save, compare, fail).
"""

from __future__ import annotations

from .diff import RULE, Comparison, TaskComparison, compare
from .sessions import SavedSession, resolve, side_for
from .sides import CompareInputError, Side

__all__ = ["RULE", "CompareInputError", "Comparison", "SavedSession", "Side", "TaskComparison", "compare",
           "resolve", "side_for"]
