"""FML-bench's scores, computed from run records alone (reference.md, 'Scoring').

``metrics``: per run (normalized improvement, the process-level metrics) and per task over seeds;
``exploration``: code embeddings and the four exploration metrics (a stable API agents import).
"""

from .metrics import EXPLORATION, PROCESS_COLUMNS, Scores, ni_test, ni_val, process_metrics, run_note

__all__ = ["EXPLORATION", "PROCESS_COLUMNS", "Scores", "ni_test", "ni_val", "process_metrics", "run_note"]
