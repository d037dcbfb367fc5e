"""The scorer's view of one run (:class:`RunInput`), built from our run records.

Original FML-bench result directories are read into the same view by :mod:`.original`, so both are
scored by one code path.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..record import RunRecord, RunStore, StepRecord
from ..safe_text import printable
from .groups import SMOKE, SMOKE_NOTE, UNMEASURED_NOTE, RunGroup, identity_of

BASELINE_SNAPSHOT = "snapshots/baseline.json"


@dataclass(frozen=True)
class StepView:
    success: bool
    metric: float | None


@dataclass
class RunInput:
    agent: str
    model: str
    task: str
    seed: int | str
    metric: str
    direction: str  # of the raw metric
    norm_best: float
    norm_worst: float | str
    baseline_val: float | None
    baseline_test: float | None
    # the baseline validation value the run itself started from (the efficiency curve's G_0)
    curve_baseline: float | None
    steps: list[StepView]
    total_steps: int
    best_val: float | None
    test: float | None
    # "ok" when ``test`` is the final test's value; otherwise why the test earns nothing
    test_reason: str
    transform: str = "none"
    tokens: float | None = None
    wall_s: float | None = None
    cost_usd: float | None = None
    # LLM calls that failed for good (None where the source does not say: the original's results)
    failed_calls: float | None = None
    # LLM replies cut off at their length limit (None where the source does not say: the original's results)
    truncated_calls: float | None = None
    # the step budget the run was given (None where the source does not say: the original's results)
    steps_budget: int | None = None
    labels: list[str] = field(default_factory=list)
    tested_baseline: bool = False
    source: str = ""
    # exploration inputs, read lazily: re-scoring a cached run never opens its snapshots
    snapshot_key: str | None = None
    load_snapshots: Callable[[], list[dict[str, str]]] | None = None
    load_baseline: Callable[[], dict[str, str] | None] | None = None
    # the run's audit (pytest_fmlbench.audit): None where it was never audited (and for the original's results)
    suspect_reasons: list[str] | None = None
    review: dict[str, float] = field(default_factory=dict)
    judges: list[str] = field(default_factory=list)
    judge_cost_usd: float | None = None
    # the rest of the run's identity (scoring.groups), None where the source does not say (the original's
    # results): only runs that agree on all of it but the seed are averaged
    provider: str | None = None
    options: dict[str, Any] | None = None
    sandbox: str | None = None
    agent_process: str | None = None
    # "smoke" for a smoke-scale run: a check of the code path, scored against no declared baseline
    scale: str | None = None
    task_version: int | None = None
    task_fingerprint: str | None = None


def printable_line(text: str, limit: int = 300) -> str:
    """``text`` as one line a terminal shows as it is: whitespace runs become one space, every other character
    that is not printable (a control character, a lone surrogate) is spelt out; cut to ``limit``."""
    return printable(" ".join(text.split()), limit)


def describe(item: Any) -> str:
    """A run as a report names it in one line: task[seed], its agent, and where it is; or a run folder."""
    if isinstance(item, tuple) and item and isinstance(item[0], RunRecord):
        record, where = item[0], item[2] if len(item) > 2 else None
        text = f"{record.task}[seed{record.seed}] of agent {record.agent}" + (f" ({where})" if where else "")
    elif isinstance(item, RunInput):
        text = f"{item.task}[seed{item.seed}] of agent {item.agent}" + (f" ({item.source})" if item.source else "")
    else:
        text = f"the run in {item}"
    return printable_line(text)


def test_reason(record: RunRecord) -> str:
    if record.integrity == "violated":
        return "integrity violated"
    if record.status == "error":
        # the runner records an agent's failure as "agent NAME <reason>": no step ran, so none failed
        error = record.error or ""
        if error.startswith(f"agent {record.agent} ") and record.steps_used == 0:
            crashed = error.startswith(f"agent {record.agent} crashed")
            return f"agent {'crashed' if crashed else 'failed'} before its first step"
        return "run crashed"
    if record.status == "running":
        return "run incomplete"
    if record.test_error:
        return "test failed"
    if record.constraint_violated:
        return "constraint violated"
    if record.test_metric is None:
        return "test failed"
    return "ok"


def labels(record: RunRecord) -> list[str]:
    """Our outcomes the original does not have, each visible in the note column."""
    out = [SMOKE_NOTE] if record.scale == SMOKE else []
    if record.baseline_test is None and record.scale != SMOKE:
        out.append(UNMEASURED_NOTE)
    if record.status == "stopped":
        out.append(f"stopped by budget ({record.stop_reason})" if record.stop_reason else "stopped by budget")
    if record.status == "finished" and record.end_reason:
        # a run its agent ended early is finished, and says why (a coding tool's 'agent ended')
        out.append(record.end_reason)
    if record.sandbox == "unsandboxed":
        out.append("unsandboxed")
    if record.agent_process == "in process":
        out.append("agent in process")
    elif record.agent_process == "external":
        out.append("external agent")
    if record.baseline_run is not None and record.test_on_baseline and record.best_val is not None:
        # OpenEvolve's port: no step beat the baseline's measured value, so its code took the final test
        out.append("tested the baseline code (no step beat its measured validation value)")
    if record.final_val_error and record.test_metric is not None:
        out.append("final val re-run failed, test still run")
    if record.test_error:
        out.append(record.test_error.splitlines()[0][:100])
    if record.audit is not None and record.audit.suspect:
        # flagged, never re-scored: the note says so, the audit's tables say why
        kinds = dict.fromkeys(f.kind for f in record.audit.flags)
        out.append(f"suspect ({', '.join(kinds)})")
    return out


def from_record(record: RunRecord, steps: list[StepRecord], run_dir: Path | None = None) -> RunInput:
    store = RunStore(Path(run_dir)) if run_dir is not None else None
    baseline_name = record.baseline_snapshot
    snapshot_key = None
    if store is not None and steps:
        digest = hashlib.sha256(json.dumps([s.snapshot_sha256 for s in steps]).encode())
        if baseline_name and (store.dir / baseline_name).is_file():
            digest.update(b"baseline" + hashlib.sha256((store.dir / baseline_name).read_bytes()).digest())
        snapshot_key = digest.hexdigest()

    def load_snapshots() -> list[dict[str, str]]:
        return [store.read_snapshot(s.snapshot) for s in steps]

    def load_baseline() -> dict[str, str] | None:
        if baseline_name and (store.dir / baseline_name).is_file():
            return store.read_snapshot(baseline_name)
        return None

    return RunInput(
        agent=record.agent, model=record.model or "-", task=record.task, seed=record.seed,
        metric=record.metric_key, direction=record.direction, transform=record.metric_transform,
        norm_best=record.norm_best, norm_worst=record.norm_worst,
        baseline_val=record.baseline_val, baseline_test=record.baseline_test, curve_baseline=record.baseline_val,
        steps=[StepView(s.success, s.metric) for s in steps], total_steps=record.steps_used,
        best_val=record.best_val, test=record.test_metric, test_reason=test_reason(record),
        tokens=float(record.usage.total_tokens), wall_s=record.wall_clock_s, cost_usd=record.usage.cost_usd,
        failed_calls=float(record.llm_failed_calls), truncated_calls=float(record.llm_truncated_calls),
        steps_budget=record.steps_budget, labels=labels(record),
        tested_baseline=record.test_on_baseline, source=str(run_dir or ""),
        snapshot_key=snapshot_key,
        load_snapshots=load_snapshots if store is not None and steps else None,
        load_baseline=load_baseline if store is not None else None,
        suspect_reasons=record.audit.reasons if record.audit is not None else None,
        review=record.audit.research_means() if record.audit is not None else {},
        judges=record.audit.judge_names if record.audit is not None else [],
        judge_cost_usd=record.audit.judge_cost_usd if record.audit is not None and record.audit.judges else None,
        provider=record.provider, options=record.agent_options, sandbox=record.sandbox,
        agent_process=record.agent_process, scale=record.scale, task_version=record.task_version,
        task_fingerprint=record.task_fingerprint,
    )


def group_title(run: RunRecord | RunInput) -> str:
    """The title of a run's group (:class:`.groups.RunGroup`): agent, model, steps, options and marks in one
    short line, the same wherever the run is shown (the tables, the HTML report's legends)."""
    run = run if isinstance(run, RunInput) else from_record(run, [])
    return RunGroup(**identity_of(run)).title
