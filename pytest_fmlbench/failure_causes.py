"""Whose failure an item's end was: the agent's, the infrastructure's, the LLM provider's, or the budget's.

A table that counts a lost node or a preempted job as the agent's failure misjudges the agent, and a rerun
that redoes every failed item repeats the agent's real failures. Each item's end gets a cause class:

- ``agent``: its code or its process failed (crashed, broke the protocol, ran out of its own limits);
- ``infra``: the node, the scheduler or the harness's resources (a node lost, a job preempted, held or
  cancelled by an admin, the job's time limit, the harness killed or out of memory or disk);
- ``provider``: the model API, after its retries, answered none of the run's calls;
- ``budget``: a token or dollar budget stopped it (``stopped``, not a failure of anyone).

The last failure of each run is kept in ``<fmlbench-out>/failures.json`` (run id -> cause and why), which
``--retry-infra`` reads to pick the items to run again, and in the run's record (``failure_cause``), which
the tables read: an ``infra`` failure is left out of NI and the process metrics (``reports.causes``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Literal

from filelock import FileLock, Timeout

Cause = Literal["agent", "infra", "provider", "budget"]
CAUSES: tuple[Cause, ...] = ("agent", "infra", "provider", "budget")
FAILURES_FILE = "failures.json"
PROPERTY = "failure_cause"  # the JUnit property; "none" for an item that did not fail

# Slurm job states in which a job ended by no doing of its item (sacct/scontrol base words); a job that
# ends in any state without its result file is the infrastructure's failure too (its harness never wrote it)
SLURM_INFRA_STATES = frozenset({"NODE_FAIL", "BOOT_FAIL", "PREEMPTED", "OUT_OF_MEMORY", "TIMEOUT", "DEADLINE",
                                "CANCELLED", "REVOKED", "FAILED", "GONE"})
# what a harness error says when the machine, not the agent, ended it
PROVIDER_MARKERS = ("LLMCallError",)


def cause_of_error(exc: BaseException, out_dir: Path, task: Any, seed: int, settings: Any) -> Cause:
    """The cause of a RunError: the one its raiser knew (``exc.failure_cause``: a Slurm job lost is the
    infrastructure's), else its run's record's, else the harness's (no record: it never got to write one)."""
    known = getattr(exc, "failure_cause", None)
    if known in CAUSES:
        return known
    from .record import RunStore
    from .runner import run_dir_for

    store = RunStore(run_dir_for(settings, task, seed)[1])
    try:
        record = store.load() if store.exists() else None
    except Exception:
        record = None
    return (cause_of_record(record) if record is not None else None) or "infra"


def cause_of_record(record: Any) -> Cause | None:
    """The cause of a run's end from its record: the one written when its item ended (a lost Slurm job
    leaves its record ``running``: only its controller knew), else read from its status and error; None for
    a run that ended well (or has not ended)."""
    written = getattr(record, "failure_cause", None)
    if written in CAUSES:
        return written
    if record.status == "stopped":
        return "budget"
    if record.status != "error":
        return None
    error = record.error or ""
    usage = getattr(record, "usage", None)
    if any(marker in error for marker in PROVIDER_MARKERS) or (
            record.llm_failed_calls and usage is not None and usage.calls == 0):
        return "provider"  # not one of its LLM calls got an answer: the provider was down for the run
    if error.startswith(f"agent {record.agent} "):
        return "agent"  # the runner names an agent's failure so; everything else is the harness's
    return "infra"


class FailureLog:
    """Run id -> its last failure ({"cause", "why"}); shared by the controller, workers and Slurm jobs."""

    def __init__(self, out_dir: Path):
        self.path = Path(out_dir) / FAILURES_FILE
        self.lock = FileLock(str(self.path) + ".lock")

    def load(self) -> dict[str, dict[str, str]]:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def note(self, run_id: str, cause: Cause | None, why: str = "") -> None:
        """The run's end: a failure's cause and line, or (cause None) no failure to remember."""
        if cause is None and not self.path.exists():
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.lock:
            failures = self.load()
            if cause is None:
                failures.pop(run_id, None)
            else:
                failures[run_id] = {"cause": cause, "why": why.splitlines()[0][:500] if why else ""}
            tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
            tmp.write_text(json.dumps(failures, indent=1, sort_keys=True))
            os.replace(tmp, self.path)
        self._write_to_record(run_id, cause)

    def _write_to_record(self, run_id: str, cause: Cause | None) -> None:
        """The cause into the run's record, where it differs; left alone while a process runs the run (its
        own end is noted when it comes). The run's folder ends with its id (runner.run_dir_for)."""
        from .record import RecordUnreadable, RunStore

        for run_dir in (self.path.parent / "runs").glob(f"*/*__{run_id}"):
            store = RunStore(run_dir)
            run_lock = FileLock(str(run_dir / ".lock"))
            try:
                run_lock.acquire(timeout=0)
            except Timeout:
                continue
            try:
                record = store.load() if store.exists() else None
                # a finished run's result stays its own: an item refused before it ran the run again (its data
                # changed, say) is not a lost run, and "infra" would leave that result out of every number
                if record is not None and cause == "infra" and record.status == "finished":
                    continue
                if record is not None and record.failure_cause != cause:
                    record.failure_cause = cause
                    store.save(record)
            except RecordUnreadable:
                pass  # the tables name an unreadable record themselves
            finally:
                run_lock.release()

    def cause(self, run_id: str) -> str | None:
        return self.load().get(run_id, {}).get("cause")


def count(causes: list[str | None]) -> dict[str, int]:
    """Failed items per cause class, for a session's summary line."""
    return {cause: n for cause in CAUSES if (n := sum(1 for c in causes if c == cause))}


def attempts(config: Any) -> int:
    """How many times an item may run in this session: once, or up to --retry-infra N times while it fails
    for the infrastructure."""
    return max(1, config.getoption("retry_infra", None) or 1)


def keep_infra_failed(config: Any, items: list, bench: Any) -> int:
    """--retry-infra: only the items whose run's last failure was the infrastructure's stay selected (the
    others are reported as deselected); returns how many were left out. ``bench``: the session's BenchConfig."""
    if bench is None or not config.getoption("retry_infra", None):
        return 0
    from .runner import run_dir_for

    failures = FailureLog(bench.settings.out_dir).load()
    kept, left_out = [], []
    for item in items:
        task = getattr(item, "task", None)
        infra = task is not None and failures.get(
            run_dir_for(bench.settings, task, item.seed)[0], {}).get("cause") == "infra"
        (kept if infra or task is None else left_out).append(item)
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = kept
    return len(left_out)
