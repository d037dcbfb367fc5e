"""One side of a comparison: one row per run (agent, model, task, seed, NI, test value, ...).

A side comes from a folder of run records (ours, or an original FML-bench results folder), read and
scored by the same code as ``fmlbench score``, or from a saved session (:mod:`.sessions`), which keeps
the scores its runs had when it ended.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

# the columns a side keeps of the scorer's per-run rows (Scores.runs)
COLUMNS = ("agent", "model", "task", "seed", "metric", "direction", "transform", "baseline_test", "raw_test",
           "ni", "ni_val", "note")
KEY = ("agent", "model", "task", "seed")


class CompareInputError(ValueError):
    """Input a comparison cannot use; the message is one line for the user."""


@dataclass
class Side:
    label: str
    runs: pd.DataFrame

    @classmethod
    def from_rows(cls, label: str, rows: list[dict]) -> Side:
        frame = pd.DataFrame(rows, columns=list(COLUMNS))
        for col in ("baseline_test", "raw_test", "ni", "ni_val"):
            frame[col] = frame[col].astype(float)
        frame["seed"] = frame["seed"].astype(str)
        return cls(label, frame)

    def records(self) -> list[dict]:
        return self.runs.to_dict(orient="records")


def score_rows(runs: list) -> list[dict]:
    """The scorer's rows for (record, steps, run_dir) tuples or RunInputs; no exploration metrics (an
    encoder would only cost time here: a comparison uses NI and the test value)."""
    from ..scoring.aggregate import Scores

    frame = Scores.from_runs(runs, encoder=None).runs
    if frame.empty:
        return []
    return frame[list(COLUMNS)].to_dict(orient="records")


def from_folder(folder: Path, label: str | None = None) -> Side:
    from ..reports.runs import find_run_dirs, load_runs
    from ..scoring.original import OriginalLayoutError, find_runs

    folder = Path(folder)
    if not folder.is_dir():
        raise CompareInputError(f"{folder} is not a directory")
    ours = find_run_dirs(folder)
    runs: list = load_runs(ours)
    try:
        runs += find_runs(folder, None, {}, exclude=set(ours))
    except OriginalLayoutError as exc:
        raise CompareInputError(str(exc)) from None
    rows = score_rows(runs)
    if not rows:
        raise CompareInputError(f"no run records (record.json) or original results (summary.json) under {folder}")
    side = Side.from_rows(label or str(folder), rows)
    _check_unique(side, hint="compare saved sessions (--fmlbench-out's sessions/) or separate output folders")
    return side


def _check_unique(side: Side, hint: str) -> None:
    """A folder that accumulated runs of one agent under different options or step budgets holds several
    runs per (agent, model, task, seed): which one to compare is not ours to guess."""
    counts = side.runs.groupby(list(KEY)).size()
    dup = counts[counts > 1]
    if not dup.empty:
        (agent, model, task, seed), n = next(iter(dup.items()))
        raise CompareInputError(
            f"{side.label} holds {n} runs of {task} seed {seed} by {agent}/{model} (different options or "
            f"--steps): {hint}")
