"""The run record: one typed log per (task, agent, model, seed) that feeds every consumer.

On disk, under the run directory::

    record.json            RunRecord (rewritten atomically after every step)
    steps.jsonl            one StepRecord per line, appended as each step finishes
    snapshots/step_NNNN.json   the editable files each step ran (never the task's data)
    logs/                  command output (tails kept)

A killed run therefore loses at most the step in flight.

What is written is read back: every value the writer takes is written so that its reader reads it (see
:mod:`.mending`), and a reader that cannot read a record raises :class:`RecordUnreadable`, naming the
file and the line, rather than leave steps out. The one exception is the last line of ``steps.jsonl``:
a kill during its write tears it, and it is dropped (a resumed run runs that step again).
"""

from __future__ import annotations

import hashlib
import json
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .audit.records import RunAudit
from .evalkit import ConstraintOutcome
from .mending import to_json

SCHEMA_VERSION = 1


def now() -> datetime:
    return datetime.now(timezone.utc)


class Usage(BaseModel):
    """LLM token usage. ``cost_usd`` is None when any call's price was unknown."""

    model_config = ConfigDict(extra="forbid")
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    calls: int = 0
    cost_usd: float | None = 0.0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        cost = None if self.cost_usd is None or other.cost_usd is None else self.cost_usd + other.cost_usd
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cached_tokens=self.cached_tokens + other.cached_tokens,
            calls=self.calls + other.calls,
            cost_usd=cost,
        )


class GpuHeld(BaseModel):
    """A GPU a run held, as nvidia-smi names it."""

    model_config = ConfigDict(extra="forbid")
    name: str
    memory_mib: int | None = None
    uuid: str = ""


class RunHardware(BaseModel):
    """The machine one run ran on: its CPU, and the GPUs the run held (not every GPU the machine has)."""

    model_config = ConfigDict(extra="forbid")
    host: str = ""
    cpu_model: str | None = None
    cpu_count: int | None = None
    gpus: list[GpuHeld] = []


class StepRecord(BaseModel):
    """One step = one validation run; also one node of the agent's search tree.

    Step 0 is the baseline run (``RunRecord.baseline_run``): the baseline code's validation run that an
    agent may ask for outside its step budget, as OpenEvolve's port does. It is never in ``steps.jsonl``.
    """

    model_config = ConfigDict(extra="forbid")
    step: int = Field(ge=0)
    parent: int | None = None
    action: str
    plan: str = ""
    idea: str | None = None
    edit_applied: bool = True
    edit_error: str = ""
    success: bool
    metric: float | None = None
    metrics: dict[str, float] = {}
    constraints: list[ConstraintOutcome] = []
    error: str = ""
    # a failed experiment's own error output, as the port's executor gives it to agents: its standard
    # error (first and last 16,000 characters), or "Timeout after N seconds"; None when the experiment
    # ran through (a failure, if any, came later: evaluation, a constraint) and in older records
    stderr: str | None = None
    analysis: str = ""
    duration_s: float = 0.0
    # the CPU time (user + system) of the step's experiment and evaluation, as the kernel counted it; None
    # where it was not counted (see executor.CommandResult.cpu_s), and in older records
    cpu_s: float | None = None
    started_at: datetime
    usage: Usage = Usage()
    snapshot: str
    snapshot_sha256: str
    is_best: bool = False
    # attempts the sandbox refused during this step, as the experiment's output reported them
    blocked: list[str] = []
    extra: dict[str, Any] = {}
    # what the writer changed so that the line can be read back (a lone surrogate, data nested too deeply),
    # one line each; [] for a line written verbatim, and in older records
    mended: list[str] = []

    @property
    def is_buggy(self) -> bool:
        return not self.success


RunStatus = Literal["running", "finished", "error", "integrity_violated", "stopped"]


class RunRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")
    schema_version: int = SCHEMA_VERSION
    run_id: str
    task: str
    task_version: int
    task_fingerprint: str
    domain: str
    agent: str
    agent_options: dict[str, Any] = {}
    model: str | None = None
    provider: str | None = None
    seed: int
    steps_budget: int
    status: RunStatus = "running"
    stop_reason: str | None = None
    # why a finished run's agent ended, in its own words, where it said: 'agent ended' for a coding tool
    # that stopped with steps left. Data, never a score; None where the agent did not say, and in older
    # records
    end_reason: str | None = None
    # the LLM limits the run was held to; a stopped run continues when they are raised
    budget: dict[str, float | None] = {}
    error: str | None = None
    # whose failure the run's last end was ("agent", "infra", "provider", "budget": failure_causes), written
    # when its item ends; an "infra" run (a lost Slurm job) is left out of NI. None for a run that ended well
    # or has not ended, and in older records
    failure_cause: Literal["agent", "infra", "provider", "budget"] | None = None
    # a person's run (--agent=human, human-assisted), not an agent's, and the person's active time over all its
    # sessions: the gaps between key presses, each counted in full up to the agent's idle_gap_s, a longer one
    # not at all. None for an agent's run, and in older records
    human: bool = False
    human_active_s: float | None = None
    # the machine the run ran on (a Slurm job's node, under --slurm), and the final test's time: the validation
    # re-run and the test run with their evaluations (compute beside the score). None in older records
    hardware: RunHardware | None = None
    final_test_s: float | None = None
    final_test_cpu_s: float | None = None
    # the task's scoring contract, copied so a record can be rescored without the task folder
    metric_key: str
    direction: Literal["higher", "lower"]
    # the scale the metric is scored on (e.g. forget quality as -log10); "none" for older records
    metric_transform: Literal["none", "neg_log10"] = "none"
    # None: the task's baseline is unmeasured (no NI until it is measured)
    baseline_val: float | None
    baseline_test: float | None
    norm_best: float
    norm_worst: float | Literal["baseline"]
    steps_used: int = 0
    valid_steps: int = 0
    best_step: int | None = None
    best_val: float | None = None
    final_val: float | None = None
    # the best code's validation re-run before the test failed (the test is run all the same)
    final_val_error: str | None = None
    test_metric: float | None = None
    test_metrics: dict[str, float] = {}
    test_constraints: list[ConstraintOutcome] = []
    constraint_violated: bool = False
    test_error: str | None = None
    test_on_baseline: bool = False
    # the baseline code's validation run outside the step budget (step 0, action "baseline"), where the
    # agent asked for one (OpenEvolve's port measures its seed so); None otherwise and in older records.
    # It counts in no step figure; it competes for the final test: a step must beat its value strictly
    baseline_run: StepRecord | None = None
    # the editable files as the run started, for the exploration metrics (None in older records)
    baseline_snapshot: str | None = None
    integrity: Literal["ok", "violated"] = "ok"
    integrity_violations: list[str] = []
    usage: Usage = Usage()
    # LLM calls that failed for good (after their retries); the agent went on with what its port makes of
    # a failed call (a failed edit, a fallback text). 0 in older records
    llm_failed_calls: int = 0
    # LLM replies that ended on their length limit (the model's, or the call's), replayed ones included: a
    # cut-off reply usually parses to no edit. 0 in older records
    llm_truncated_calls: int = 0
    # per sampling field (temperature, seed, ...): how many calls asked for it and did not send it, because
    # FML-bench's llm.py sends that model family none or the provider's API has no such field; {} in older records
    llm_unsent: dict[str, int] = {}
    # exceptions the agent's main loop raised and caught, as its port does: the run went on (to the next
    # idea, or to the final test on the best code so far) and finished. Each "where: Type: message" with
    # the traceback's end; [] in older records
    caught_errors: list[str] = []
    wall_clock_s: float = 0.0
    started_at: datetime = Field(default_factory=now)
    finished_at: datetime | None = None
    devices: list[str] = []
    # a full-profile task's scale: "full" (the original's data and scale) or "smoke" (fixture data, a few
    # batches: a check of the code path, never a result); None for small-profile tasks and older records
    scale: str | None = None
    # a full-profile run's data, as verified before its first step: per artefact its SHA-256 and size, or its
    # commit, and for one whose publishers give no checksum how it was pinned. A result names the bytes it
    # was measured on; {} for small-profile tasks and older records
    data: dict[str, dict[str, Any]] = {}
    # how experiments were isolated: "bwrap" (the default), "unsandboxed" (--no-sandbox); None in
    # records written before isolation existed
    sandbox: str | None = None
    # where the agent's run(session) executed: "bwrap" (its own sandboxed process, the default),
    # "unsandboxed" (its own process, --no-sandbox), "in process" (the harness's, --agent-in-process) or
    # "external" (another program, --agent=external); None in records written before agents had a process
    agent_process: str | None = None
    resumed_from_step: int | None = None
    # how the run got its score: cheap signals and, when asked, a judge model's reviews (pytest_fmlbench.audit);
    # written after the run, never read by the scorer's numbers. None until audited, and in older records
    audit: RunAudit | None = None
    # what the writer changed so that the record can be read back (a lone surrogate, data nested too
    # deeply), one line each; [] for a record written verbatim, and in older records
    mended: list[str] = []


class RecordUnreadable(ValueError):
    """A run record, or a line of its steps, that its reader cannot read: never a silent drop of steps."""

    def __init__(self, path: Path, reason: str, line: int | None = None):
        self.path = Path(path)
        self.line = line
        self.reason = reason
        where = f"{path}, line {line}" if line is not None else str(path)
        super().__init__(f"unreadable run record {where}: {reason}")


class RunStore:
    """Reads and writes one run directory."""

    def __init__(self, run_dir: Path):
        self.dir = run_dir
        self.record_path = run_dir / "record.json"
        self.steps_path = run_dir / "steps.jsonl"
        self.snapshots = run_dir / "snapshots"
        self.logs = run_dir / "logs"

    def exists(self) -> bool:
        return self.record_path.is_file()

    def load(self) -> RunRecord:
        """The record; raises RecordUnreadable naming the file."""
        try:
            return RunRecord.model_validate_json(self.record_path.read_bytes())
        except OSError as exc:
            raise RecordUnreadable(self.record_path, exc.strerror or str(exc)) from None
        except ValidationError as exc:
            raise RecordUnreadable(self.record_path, _why(exc)) from None

    def save(self, record: RunRecord) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        _atomic_write(self.record_path, to_json(record, indent=2))

    def load_steps(self) -> list[StepRecord]:
        """The steps recorded so far, every line read as written; raises RecordUnreadable naming the file and
        the line. Only the last line may be torn, by a kill while it was written: without its newline, or
        unreadable, it is dropped (a resumed run runs that step again)."""
        if not self.steps_path.is_file():
            return []
        try:
            data = self.steps_path.read_bytes()
        except OSError as exc:
            raise RecordUnreadable(self.steps_path, exc.strerror or str(exc)) from None
        # lines end at b"\n" alone: text may hold other line breaks (U+2028, U+0085) that JSON leaves as they are
        lines = data.split(b"\n")
        lines.pop()  # what follows the last newline: nothing, or a line torn before its newline
        steps = []
        for number, line in enumerate(lines, start=1):
            try:
                steps.append(StepRecord.model_validate_json(line))
            except ValidationError as exc:
                if number == len(lines) and data.endswith(b"\n"):
                    break  # the last line, torn (a file system may keep a killed write's length, not its bytes)
                raise RecordUnreadable(self.steps_path, _why(exc), line=number) from None
        return steps

    def append_step(self, step: StepRecord) -> None:
        with open(self.steps_path, "a", encoding="utf-8") as fh:
            fh.write(to_json(step) + "\n")
            fh.flush()
            os.fsync(fh.fileno())

    def rewrite_steps(self, steps: list[StepRecord]) -> None:
        _atomic_write(self.steps_path, "".join(to_json(s) + "\n" for s in steps))

    def write_snapshot(self, step: int, files: dict[str, str]) -> tuple[str, str]:
        self.snapshots.mkdir(parents=True, exist_ok=True)
        name = f"step_{step:04d}.json"
        _atomic_write(self.snapshots / name, json.dumps(files, indent=1, sort_keys=True))
        return f"snapshots/{name}", files_sha256(files)

    def write_named_snapshot(self, name: str, files: dict[str, str]) -> str:
        """``snapshots/<name>.json`` (e.g. the baseline's files); returns its name relative to the run."""
        self.snapshots.mkdir(parents=True, exist_ok=True)
        _atomic_write(self.snapshots / f"{name}.json", json.dumps(files, indent=1, sort_keys=True))
        return f"snapshots/{name}.json"

    def read_snapshot(self, name: str) -> dict[str, str]:
        return json.loads((self.dir / name).read_text())


def files_sha256(files: dict[str, str]) -> str:
    digest = hashlib.sha256()
    for path in sorted(files):
        # surrogatepass: the same bytes as UTF-8 for any text, and a digest for text no file can hold
        for text in (path, files[path]):
            digest.update(text.encode("utf-8", "surrogatepass") + b"\0")
    return digest.hexdigest()


def _why(exc: ValidationError) -> str:
    """The first reason a record does not validate, without the offending input (an agent's words)."""
    errors = exc.errors(include_input=False, include_url=False)
    error = errors[0]
    where = ".".join(str(part) for part in error["loc"]).encode("ascii", "backslashreplace").decode("ascii")[:120]
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return (f"{where}: {error['msg']}" if where else error["msg"]) + more


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
