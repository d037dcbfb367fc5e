"""The machine-readable session summary (``session.json``): the tables as data, the encoder, versions,
the suite's git commit and the session's options, for dashboards that do not read JUnit XML.

The numbers are those of :class:`~pytest_fmlbench.scoring.aggregate.Scores` (the terminal's and the
CSVs'); NaN becomes null. ``schema_version`` changes whenever a field changes meaning or goes away.
"""

from __future__ import annotations

import math
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from ..scoring.aggregate import Scores
from ..scoring.aup import aup_table, solver_name
from ..scoring.metrics import PROCESS_COLUMNS
from .provenance import common_folder, suite_commit, versions

SCHEMA_VERSION = 1
FILE_NAME = "session.json"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


# one float-or-null field per process metric, so the JSON schema names each column
ProcessValues = create_model("ProcessValues", __base__=_Strict,
                             **{col: (float | None, None) for col in PROCESS_COLUMNS})


class RawRow(_Strict):
    task: str
    metric: str
    direction: Literal["higher", "lower"]
    transform: str
    baseline_test: float | None
    raw_test: float | None
    raw_test_sem: float | None
    seeds: int
    note: str


class NormalizedRow(_Strict):
    task: str
    ni: float | None
    ni_sem: float | None
    ni_val: float | None
    ni_val_sem: float | None
    seeds: int
    note: str


class ProcessRow(_Strict):
    task: str
    values: ProcessValues
    sem: ProcessValues
    seeds: int


class SolverTables(_Strict):
    """One agent/model pair: the original's three tables, one row per task, and their means over tasks."""

    solver: str
    agent: str
    model: str
    raw_performance: list[RawRow]
    normalized_improvement: list[NormalizedRow]
    normalized_improvement_mean: dict[Literal["ni", "ni_val"], float | None]
    process_metrics: list[ProcessRow]
    process_metrics_mean: ProcessValues


class AupRow(_Strict):
    solver: str
    aup_best_attempt: float | None
    aup_final: float | None


class SuiteInfo(_Strict):
    path: str | None = None
    git_commit: str | None = None
    # uncommitted changes under the suite folder when the session ran
    git_dirty: bool | None = None


class SessionOptions(_Strict):
    """What the session was asked to do (API keys never appear here)."""

    agent: str
    agent_options: dict[str, Any] = {}
    model: str | None = None
    provider: str | None = None
    steps: int
    seeds: int
    sandboxed: bool = True
    # where the agent ran: "process" (its own, the default), "in process" or "external"
    agent_mode: str = "process"
    fresh: bool = False
    max_cost_usd: float | None = None
    max_tokens: int | None = None


class SessionSummary(_Strict):
    schema_version: Literal[1] = SCHEMA_VERSION
    generated_at: datetime
    source: Literal["pytest", "fmlbench score"]
    # the code encoder of the exploration metrics (Spread, Uniqueness, Reach, Effective dim)
    encoder: str
    versions: dict[str, str | None]
    suite: SuiteInfo
    options: SessionOptions | None = Field(None, description="null for `fmlbench score`, which runs nothing")
    tables: list[SolverTables]
    aup: list[AupRow]
    runs: int


def _value(value: Any) -> float | None:
    if value is None:
        return None
    value = float(value)
    return None if math.isnan(value) or math.isinf(value) else value


def _solver_tables(agent: str, model: str, scores: Scores) -> SolverTables:
    tasks = scores.per_task()
    summary = scores.summary()
    raw, norm, process = [], [], []
    for task, row in tasks.iterrows():
        seeds = int(row["seeds"])
        raw.append(RawRow(task=task, metric=row["metric"], direction=row["direction"], transform=row["transform"],
                          baseline_test=_value(row["baseline_test"]), raw_test=_value(row["raw_test"]),
                          raw_test_sem=_value(row["raw_test_sem"]), seeds=seeds, note=row["note"]))
        norm.append(NormalizedRow(task=task, ni=_value(row["ni"]), ni_sem=_value(row["ni_sem"]),
                                  ni_val=_value(row["ni_val"]), ni_val_sem=_value(row["ni_val_sem"]),
                                  seeds=seeds, note=row["note"]))
        process.append(ProcessRow(task=task, seeds=seeds,
                                  values=ProcessValues(**{c: _value(row[c]) for c in PROCESS_COLUMNS}),
                                  sem=ProcessValues(**{c: _value(row[f"{c}_sem"]) for c in PROCESS_COLUMNS})))
    return SolverTables(
        solver=solver_name(agent, model), agent=agent, model=model, raw_performance=raw,
        normalized_improvement=norm,
        normalized_improvement_mean={"ni": _value(summary["ni"]), "ni_val": _value(summary["ni_val"])},
        process_metrics=process,
        process_metrics_mean=ProcessValues(**{c: _value(summary[c]) for c in PROCESS_COLUMNS}),
    )


def build_summary(scores: Scores, *, source: Literal["pytest", "fmlbench score"],
                  options: SessionOptions | None = None, suite: Path | None = None) -> SessionSummary:
    commit, dirty = suite_commit(suite)
    aup = aup_table(scores) if not scores.runs.empty else None
    return SessionSummary(
        generated_at=datetime.now(timezone.utc), source=source, encoder=scores.encoder, versions=versions(),
        suite=SuiteInfo(path=str(Path(suite).resolve()) if suite else None, git_commit=commit, git_dirty=dirty),
        options=options,
        tables=[_solver_tables(agent, model, group) for (agent, model), group in scores.groups()],
        aup=[] if aup is None else [AupRow(solver=str(solver), aup_best_attempt=_value(row["aup_best_attempt"]),
                                           aup_final=_value(row["aup_final"])) for solver, row in aup.iterrows()],
        runs=len(scores.runs),
    )


def write_summary(summary: SessionSummary, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(summary.model_dump_json(indent=2) + "\n")
    os.replace(tmp, path)
    return path


def suite_of(task_dirs: list[Path]) -> Path | None:
    """The suite folder of a session: the folder holding all its task folders."""
    parents = [Path(d).parent for d in task_dirs]
    return common_folder(parents)
