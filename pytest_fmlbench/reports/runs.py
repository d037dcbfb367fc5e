"""Run records read back for the reports: every run folder under a root, each as (record, steps, folder),
and those runs as :class:`~pytest_fmlbench.scoring.aggregate.Scores`.

Every reader of a run folder (the session's tables, ``fmlbench score``, ``fmlbench report``, the compare
gate) loads it here, through :class:`~pytest_fmlbench.record.RunStore`: a record that cannot be read is
left out with one line naming its file and line, and the others are reported.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..record import RecordUnreadable, RunStore
from ..scoring.aggregate import AUTO, LeftOut, Scores, failure_line, say_left_out
from ..scoring.runs import printable_line


def load_runs(run_dirs: list[Path], left_out: LeftOut = say_left_out) -> list[tuple]:
    """(record, steps, run_dir) for every run directory holding a readable record; ``left_out`` is told of
    each one that cannot be read (by default, one line on standard error)."""
    runs = []
    for run_dir in map(Path, run_dirs):
        store = RunStore(run_dir)
        if not store.exists():
            continue
        try:
            runs.append((store.load(), store.load_steps(), run_dir))
        except RecordUnreadable as exc:
            left_out(run_dir, printable_line(str(exc), limit=600))
        except Exception as exc:  # whatever else a folder holds: one run's failure is its own
            left_out(run_dir, f"cannot be read: {failure_line(exc)}")
    return runs


def find_run_dirs(root: Path) -> list[Path]:
    return sorted(p.parent for p in Path(root).rglob("record.json"))


def as_scores(runs: Scores | list, encoder: Any = AUTO) -> Scores:
    return runs if isinstance(runs, Scores) else Scores.from_runs(runs, encoder=encoder)
