"""Run records read back for the reports: every run folder under a root, each as (record, steps, folder),
and those runs as :class:`~pytest_fmlbench.scoring.aggregate.Scores`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..record import RunStore
from ..scoring.aggregate import AUTO, Scores


def load_runs(run_dirs: list[Path]) -> list[tuple]:
    """(record, steps, run_dir) for every run directory holding a record."""
    runs = []
    for run_dir in run_dirs:
        store = RunStore(Path(run_dir))
        if store.exists():
            runs.append((store.load(), store.load_steps(), Path(run_dir)))
    return runs


def find_run_dirs(root: Path) -> list[Path]:
    return sorted(p.parent for p in Path(root).rglob("record.json"))


def as_scores(runs: Scores | list, encoder: Any = AUTO) -> Scores:
    return runs if isinstance(runs, Scores) else Scores.from_runs(runs, encoder=encoder)
