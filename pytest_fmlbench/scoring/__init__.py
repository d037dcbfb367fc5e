"""FML-bench's scores, computed from run records alone (reference.md, 'Scoring').

* :mod:`.metrics`: one run's numbers, with the original scorer's rules (compute_agent_metrics.py);
* :mod:`.exploration`: code embeddings and the four exploration metrics (a stable API agents import);
* :mod:`.runs` / :mod:`.original`: the scorer's view of a run, from our records or an original results
  directory;
* :mod:`.aggregate`: mean ± SEM over seeds, plain mean over tasks; :mod:`.aup`: MLGym's AUP.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..record import RunRecord, StepRecord
from .metrics import EXPLORATION, PROCESS_COLUMNS, note, score_run
from .runs import RunInput, from_record

if TYPE_CHECKING:
    from .aggregate import AUTO, EncoderChoice, Scores


def __getattr__(name: str):
    # the tables' half (pandas) loads when a caller asks for it: every pytest and xdist worker imports this
    # package for one run's NI, which needs none of it
    if name in ("AUTO", "EncoderChoice", "Scores"):
        from . import aggregate

        return getattr(aggregate, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = ["AUTO", "EXPLORATION", "PROCESS_COLUMNS", "EncoderChoice", "RunInput", "Scores", "from_record",
           "ni_test", "ni_val", "process_metrics", "run_note", "score_run"]


def ni_test(record: RunRecord) -> float:
    """Normalized improvement on test as the tables count it (0 when the test earned no credit)."""
    return float(score_run(from_record(record, []))["ni"])


def ni_val(record: RunRecord) -> float:
    """Normalized improvement of the best validation value (baseline's when no step succeeded)."""
    return float(score_run(from_record(record, []))["ni_val"])


def process_metrics(record: RunRecord, steps: list[StepRecord]) -> dict[str, float]:
    """The process-level metrics but the exploration ones (those need the run directory's snapshots)."""
    row = score_run(from_record(record, steps))
    return {col: (float("nan") if col in EXPLORATION else float(row[col])) for col in PROCESS_COLUMNS}


def run_note(record: RunRecord) -> str:
    return note(from_record(record, []))
