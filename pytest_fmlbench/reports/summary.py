"""The machine-readable session summary (``session.json``): the tables as data, the encoder, versions,
the suite's git commit and the session's options, for dashboards that do not read JUnit XML.

The numbers are those of :class:`~pytest_fmlbench.scoring.aggregate.Scores` (the terminal's and the
CSVs'); NaN becomes null. ``schema_version`` changes whenever a field changes meaning or goes away.
"""

from __future__ import annotations

import json
import math
import os
from collections import Counter
from collections.abc import Iterable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, create_model

from ..llm.ledger import LEDGER_FILE
from ..mending import to_json
from ..scoring.aggregate import Scores
from ..scoring.aup import aup_table
from ..scoring.groups import SMOKE_NOTE, RunGroup
from ..scoring.metrics import PROCESS_COLUMNS
from . import causes, compute
from .disclosure import Hardware
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


class ReviewRow(_Strict):
    task: str
    # each rubric dimension, averaged over judges and then over the task's judged seeds
    scores: dict[str, float | None]
    judged_runs: int


class SuspectRun(_Strict):
    task: str
    seed: int | str
    reasons: list[str]


class SolverTables(_Strict):
    """One run group (every identity but the seed: only seeds are averaged): the original's three tables,
    one row per task, and their means over tasks."""

    # the group's name in the tables (its agent/model, plus what sets it apart from the pair's other groups)
    solver: str
    # its whole identity in one line: agent / model / provider / steps / options / marks
    title: str
    agent: str
    model: str
    provider: str | None = None
    steps_budget: int | None = None
    # the options the runs were given; null where the source does not record them (the original's results)
    agent_options: dict[str, Any] | None = None
    sandbox: str | None = None
    agent_process: str | None = None
    # a smoke group checks the code path on fixture data: no NI (null) and no AUP against declared baselines
    smoke: bool = False
    smoke_note: str | None = None
    raw_performance: list[RawRow]
    normalized_improvement: list[NormalizedRow]
    normalized_improvement_mean: dict[Literal["ni", "ni_val"], float | None]
    process_metrics: list[ProcessRow]
    process_metrics_mean: ProcessValues
    # what the group's LLM calls asked for that was not sent, per sampling field ("temperature", "seed",
    # "max_output_tokens"): the number of calls. FML-bench's llm.py sends that field to none of the model's
    # family, or the provider's API has no such field (see the ledger's per-call "unsent"); {} when every
    # call carried what it asked for, and for the original's results
    llm_unsent: dict[str, int] = {}
    # the audit (pytest_fmlbench.audit): runs audited, the suspect ones with their reasons, the research review
    audited_runs: int = 0
    suspect_runs: list[SuspectRun] = []
    research_review: list[ReviewRow] = []
    research_review_mean: dict[str, float | None] = {}
    judges: list[str] = []
    judge_cost_usd: float | None = None
    # the group's failed runs per cause ("agent", "infra", "provider", "budget": pytest_fmlbench.failure_causes;
    # a budget's stop counts, though not a failure); {} where none failed
    failures_by_cause: dict[str, int] = {}
    # task[seedN] of the runs the infrastructure failed (a lost node, a cancelled job): counted above, left out
    # of every number of these tables and of AUP, since they are not the agent's
    infra_left_out: list[str] = []
    # the GPUs its runs held times the time of their recorded steps and final tests (reports.compute), and its
    # mean NI over tasks per GPU-hour of a run; null where no run held a GPU. Its runs' CPU time where the
    # kernel counted it (each command's control group); null where it counted none
    gpu_hours: float | None = None
    ni_per_gpu_hour: float | None = None
    cpu_hours: float | None = None


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
    # whether experiments and the agent's process could reach the network (never inside the sandbox; the
    # agent's LLM calls go through the harness either way)
    network: bool = False
    # the time given: the agent process's own budget (None: 600 s + steps x the task's timeout) and each
    # task's timeout per experiment
    agent_timeout_s: float | None = None
    task_timeouts_s: dict[str, float] = {}
    # sha256 of the agent's own code (its file, package or built-in module); None for an external program
    agent_code_sha256: str | None = None
    # the judges of --fmlbench-judge (provider:model)
    judges: list[str] = []
    # --scale of full-profile tasks: "full", or "smoke" (a check of the code path, not a result); null where
    # the session did not say
    scale: str | None = None


class SessionSummary(_Strict):
    schema_version: Literal[1] = SCHEMA_VERSION
    generated_at: datetime
    source: Literal["pytest", "fmlbench score"]
    # the code encoder of the exploration metrics (Spread, Uniqueness, Reach, Effective dim)
    encoder: str
    versions: dict[str, str | None]
    suite: SuiteInfo
    options: SessionOptions | None = Field(None, description="null for `fmlbench score`, which runs nothing")
    hardware: Hardware | None = Field(None, description="the machine the session ran on; null for `fmlbench score`")
    tables: list[SolverTables]
    aup: list[AupRow]
    runs: int


def _value(value: Any) -> float | None:
    if value is None:
        return None
    value = float(value)
    return None if math.isnan(value) or math.isinf(value) else value


def _solver_tables(group: RunGroup, every_run: Scores) -> SolverTables:
    """One group's tables from its runs but those the infrastructure failed (counted, named, left out)."""
    runs = every_run.runs
    scores = Scores(runs[runs[causes.COLUMN] != causes.INFRA].reset_index(drop=True), every_run.encoder)
    tasks = scores.per_task() if not scores.runs.empty else pd.DataFrame()
    summary = scores.summary() if not scores.runs.empty else {}
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
        solver=group.label, title=group.title, agent=group.agent, model=group.model,
        provider=group.provider or None, steps_budget=int(group.steps_budget) if group.steps_budget else None,
        agent_options=json.loads(group.options) if group.options else None, sandbox=group.sandbox or None,
        agent_process=group.agent_process or None, smoke=group.smoke, smoke_note=SMOKE_NOTE if group.smoke else None,
        raw_performance=raw,
        normalized_improvement=norm,
        normalized_improvement_mean={"ni": _value(summary.get("ni")), "ni_val": _value(summary.get("ni_val"))},
        process_metrics=process,
        process_metrics_mean=ProcessValues(**{c: _value(summary.get(c)) for c in PROCESS_COLUMNS}),
        llm_unsent=unsent_sampling(every_run.runs["source"]),
        failures_by_cause=causes.counts(every_run), infra_left_out=causes.infra_runs(every_run),
        **(compute.group_compute(scores) if not scores.runs.empty else {}),
        **_audit_fields(scores.runs),
    )


def unsent_sampling(run_dirs: Iterable[str]) -> dict[str, int]:
    """The ledgers' per-call ``unsent`` fields summed over the runs in ``run_dirs``: per sampling field, how
    many calls asked for it and went without it. Runs without a ledger (the original's results) add nothing."""
    counts: Counter[str] = Counter()
    for run_dir in run_dirs:
        ledger = Path(run_dir) / LEDGER_FILE if run_dir else None
        if ledger is None or not ledger.is_file():
            continue
        with open(ledger, encoding="utf-8", errors="replace") as lines:
            for line in lines:
                # most calls send all they ask for: those lines (prompts and replies, often long) are not parsed
                if '"unsent": [' not in line or '"unsent": []' in line:
                    continue
                try:
                    unsent = json.loads(line).get("unsent")
                except (json.JSONDecodeError, AttributeError):
                    continue  # a line torn by a kill
                if isinstance(unsent, list):
                    counts.update(str(field) for field in unsent)
    return dict(sorted(counts.items()))


def _audit_fields(runs) -> dict[str, Any]:
    if "suspect" not in runs:
        return {}
    audited = runs[runs["suspect"].notna()]
    suspect = audited[audited["suspect"] > 0]
    fields: dict[str, Any] = {
        "audited_runs": len(audited),
        "suspect_runs": [SuspectRun(task=row["task"], seed=row["seed"], reasons=str(row["suspect_reasons"]).split("\n"))
                         for _, row in suspect.iterrows()],
    }
    judged = audited[audited["judges"].astype(str) != ""]
    dims = [c for c in judged.columns if c.startswith("review_")]
    if not judged.empty and dims:
        per_task = judged.groupby("task")[dims].mean()
        fields["research_review"] = [
            ReviewRow(task=task, scores={d.removeprefix("review_"): _value(row[d]) for d in dims},
                      judged_runs=int((judged["task"] == task).sum())) for task, row in per_task.iterrows()]
        fields["research_review_mean"] = {d.removeprefix("review_"): _value(per_task[d].mean()) for d in dims}
        fields["judges"] = sorted({n.strip() for cell in judged["judges"] for n in str(cell).split(",") if n.strip()})
        costs = judged["judge_cost_usd"]
        fields["judge_cost_usd"] = None if costs.isna().any() else float(costs.sum())
    return fields


def build_summary(scores: Scores, *, source: Literal["pytest", "fmlbench score"],
                  options: SessionOptions | None = None, suite: Path | None = None,
                  hardware: Hardware | None = None) -> SessionSummary:
    commit, dirty = suite_commit(suite)
    causes.with_causes(scores)
    compute.with_gpu_hours(scores)
    own = causes.agents_own(scores)
    aup = aup_table(own) if not own.runs.empty else None
    return SessionSummary(
        generated_at=datetime.now(timezone.utc), source=source, encoder=scores.encoder, versions=versions(),
        suite=SuiteInfo(path=str(Path(suite).resolve()) if suite else None, git_commit=commit, git_dirty=dirty),
        options=options, hardware=hardware,
        tables=[_solver_tables(group, part) for group, part in scores.groups()],
        aup=[] if aup is None else [AupRow(solver=str(solver), aup_best_attempt=_value(row["aup_best_attempt"]),
                                           aup_final=_value(row["aup_final"])) for solver, row in aup.iterrows()],
        runs=len(scores.runs),
    )


def encoded(summary: SessionSummary) -> str:
    """The summary as JSON its reader reads back, whatever the session's agent named itself or nested in its
    options (a lone surrogate, a default nested hundreds of levels deep: mended, see ``mending``)."""
    return to_json(summary, indent=2) + "\n"


def write_summary(summary: SessionSummary, path: Path) -> Path:
    path = Path(path)
    text = encoded(summary)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    return path


def suite_of(task_dirs: list[Path]) -> Path | None:
    """The suite folder of a session: the folder holding all its task folders."""
    parents = [Path(d).parent for d in task_dirs]
    return common_folder(parents)
