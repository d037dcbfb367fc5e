"""Whose failure each scored run's end was, for the tables: failures counted by cause, and the runs the
infrastructure failed (a lost node, a cancelled or preempted job, the harness's own resources) left out of
NI and the process metrics, since their numbers are not the agent's.

The cause is the one each run's record carries (:mod:`..failure_causes`); runs read from elsewhere (the
original's results) carry none and are scored as they are.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..failure_causes import CAUSES, FailureLog, cause_of_record
from ..record import RecordUnreadable, RunStore
from ..scoring.aggregate import Scores
from ..scoring.groups import group_keys, run_groups

COLUMN = "failure_cause"
INFRA = "infra"
INFRA_NOTE = ("infra failures are left out of NI and the process metrics (the infrastructure failed them, "
              "not the agent)")


def cause_at(source: str) -> str:
    """The cause of a run folder's last end; "" where it did not fail or there is no record to read."""
    store = RunStore(Path(source)) if source else None
    if store is None or not store.exists():
        return ""
    try:
        record = store.load()
    except (RecordUnreadable, OSError):
        return ""
    cause = cause_of_record(record)
    if cause is None and record.status == "running" and len(store.dir.parents) > 2:
        # a job lost with its process: its record kept "running", and the cause could not be written into it
        # while the process, being killed, still held the run; the output folder's failures.json has it
        cause = FailureLog(store.dir.parents[2]).cause(record.run_id)
    return cause or ""


def with_causes(scores: Scores) -> Scores:
    """``scores`` itself, given a ``failure_cause`` column ("" for a run that did not fail) where it has none:
    the session's tables, CSVs, summary and HTML page share one Scores, and read the records once."""
    if not scores.runs.empty and COLUMN not in scores.runs:
        scores.runs[COLUMN] = [cause_at(str(source)) for source in scores.runs["source"]]
    return scores


def agents_own(scores: Scores) -> Scores:
    """The runs whose numbers are the agent's: all but those the infrastructure failed. Groups are named
    anew where one is left with no run (a group's label depends on the others')."""
    scores = with_causes(scores)
    if scores.runs.empty:
        return scores
    kept = scores.runs[scores.runs[COLUMN] != INFRA].reset_index(drop=True)
    if len(kept) == len(scores.runs):
        return scores
    if not kept.empty:
        labels = {group.key: group.label for group in run_groups(kept)}
        kept["group"] = [labels[key] for key in group_keys(kept)]
    return Scores(kept, scores.encoder)


def counts(scores: Scores) -> dict[str, int]:
    """Runs per cause class, for causes that occur, in the classes' order."""
    scores = with_causes(scores)
    if scores.runs.empty:
        return {}
    found = scores.runs[COLUMN].value_counts()
    return {cause: int(found[cause]) for cause in CAUSES if cause in found}


def infra_runs(scores: Scores) -> list[str]:
    """``task[seedN]`` of each run the infrastructure failed."""
    scores = with_causes(scores)
    if scores.runs.empty:
        return []
    infra = scores.runs[scores.runs[COLUMN] == INFRA]
    return [f"{task}[seed{seed}]" for task, seed in zip(infra["task"], infra["seed"])]


def counts_line(scores: Scores) -> str | None:
    """One line for a group's tables: its failures by cause and, where the infrastructure failed some, which
    were left out; None where no run failed."""
    found = counts(scores)
    if not found:
        return None
    line = "Failures by cause: " + ", ".join(f"{cause} {n}" for cause, n in found.items())
    left_out = infra_runs(scores)
    if left_out:
        line += f"; {INFRA_NOTE}: {', '.join(left_out)}"
    return line


def counts_frame(pairs: list) -> pd.DataFrame:
    """Failed runs per cause (rows) and run group (columns), from (RunGroup, Scores) pairs."""
    return pd.DataFrame({group.label: {cause: counts(part).get(cause, 0) for cause in CAUSES}
                         for group, part in pairs}, index=list(CAUSES), dtype=int)
