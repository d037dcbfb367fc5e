"""One side of a comparison: one row per run (agent, model, task, seed, NI, test value, ...).

A side comes from a folder of run records (ours, or an original FML-bench results folder), read and
scored by the same code as ``fmlbench score``, or from a saved session (:mod:`.sessions`), which keeps
the scores its runs had when it ended.

Beside NI, each run carries NI's scale D (``ni_scale``) and its signed improvement: the same
direction-aware (test - baseline test) / D, without NI's clamp at 0, so that a run worse than the
baseline scores below one that changed nothing. Sessions saved before D was kept have none; a
comparison then borrows the other side's D for the same task and baseline (:mod:`.diff`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ..reports import causes
from ..reports.disclosure import Hardware

# the columns a side keeps of the scorer's per-run rows (Scores.runs)
COLUMNS = ("agent", "model", "task", "seed", "metric", "direction", "transform", "baseline_test", "raw_test",
           "ni", "ni_val", "note")
# beside them, NI's scale D (sessions saved before it was kept have none: NaN)
SCALE = "ni_scale"
KEY = ("agent", "model", "task", "seed")


class CompareInputError(ValueError):
    """Input a comparison cannot use; the message is one line for the user."""


@dataclass
class Side:
    label: str
    runs: pd.DataFrame
    # the machine the runs ran on; None where it was not recorded (an older session, the original's results)
    hardware: Hardware | None = None

    @classmethod
    def from_rows(cls, label: str, rows: list[dict], hardware: Hardware | None = None) -> Side:
        frame = pd.DataFrame(rows, columns=[*COLUMNS, SCALE])
        for col in ("baseline_test", "raw_test", "ni", "ni_val", "ni_scale"):
            frame[col] = frame[col].astype(float)
        frame["seed"] = frame["seed"].astype(str)
        return cls(label, with_signed(frame), hardware)

    def records(self) -> list[dict]:
        return self.runs.to_dict(orient="records")


def with_signed(frame: pd.DataFrame) -> pd.DataFrame:
    """``signed``: NI without its clamp, on the scored scale (``direction`` is the scored one); NaN where
    D is unknown or zero, and wherever NI is not defined (a smoke run: no result against declared baselines)."""
    gain = frame["raw_test"] - frame["baseline_test"]
    gain = gain.where(frame["direction"] == "higher", -gain)
    scale = frame["ni_scale"].where(frame["ni_scale"] > 0)
    signed = (gain / scale).astype(float).replace([np.inf, -np.inf], np.nan)
    return frame.assign(signed=signed.where(frame["ni"].notna()))


def score_rows(runs: list) -> list[dict]:
    """The scorer's rows for (record, steps, run_dir) tuples or RunInputs, with NI's scale D; no exploration
    metrics (an encoder would only cost time here: a comparison uses NI and the test value)."""
    return [row for row in scored_rows(runs) if row is not None]


def scored_rows(runs: list) -> list[dict | None]:
    """One entry per run given, in order: its row, or None for a run the scorer left out (it says why)."""
    from ..scoring.aggregate import Scores, say_left_out
    from ..scoring.runs import RunInput, from_record

    inputs = []
    for item in runs:
        try:
            inputs.append(item if isinstance(item, RunInput) else from_record(*item))
        except Exception:
            inputs.append(item)  # not readable as a run: the scorer leaves it out and says why
    left: set[int] = set()

    def left_out(item, why: str) -> None:
        # without an encoder, the scorer tells only of runs it leaves out
        left.add(id(item))
        say_left_out(item, why)

    # all runs in one pass: the scorer tells apart what only the whole set shows (one task's versions)
    frame = Scores.from_runs(inputs, encoder=None, left_out=left_out).runs
    rows = iter(frame[list(COLUMNS)].to_dict(orient="records") if not frame.empty else [])
    # a run the infrastructure failed (a lost node) is not the agent's score, here as in the session's tables
    infra = iter([causes.cause_at(str(source)) == causes.INFRA for source in frame["source"]]
                 if not frame.empty else [])
    out: list[dict | None] = []
    for run in inputs:
        if id(run) in left:
            out.append(None)
            continue
        row, failed_by_infra = next(rows), next(infra)
        if failed_by_infra:
            say_left_out(run, "the infrastructure failed it (failure_cause infra): it is not the agent's score")
            out.append(None)
        else:
            out.append({**row, SCALE: _scale(run, row["baseline_test"])})
    return out


def _scale(run, baseline_test: float) -> float:
    """NI's D for one run, from its task's normalisation bounds (on the scored scale) and baseline test value."""
    from ..scoring.metrics import scale

    try:
        return scale(run.norm_best, run.norm_worst, baseline_test)
    except (TypeError, ValueError):
        return float("nan")


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
    side = Side.from_rows(label or str(folder), rows, hardware=folder_hardware(folder))
    _check_unique(side, hint="compare saved sessions (--fmlbench-out's sessions/) or separate output folders")
    return side


def folder_hardware(folder: Path) -> Hardware | None:
    """The machine of the last session that wrote an output folder (its reports/session.json; for the folder's
    runs/, the one beside it), where it says."""
    from ..reports.summary import FILE_NAME

    folder = Path(folder)
    for out_dir in (folder, folder.parent) if folder.name == "runs" else (folder,):
        try:
            found = json.loads((out_dir / "reports" / FILE_NAME).read_text()).get("hardware")
        except (OSError, ValueError, AttributeError):
            continue
        try:
            return Hardware.model_validate(found) if found else None
        except ValueError:
            return None
    return None


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
