"""Collection: a folder with a task.yaml becomes a collector with one test item per seed."""

from __future__ import annotations

import math
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import replace
from pathlib import Path

import pytest

from . import failure_causes, session_budget
from .audit.properties import audit_properties
from .audit.run import audit_run
from .record import RecordUnreadable, RunRecord, RunStore
from .runner import RunBusy, RunError, RunOutcome, execute, run_dir_for
from .scoring import ni_test
from .scoring.groups import SMOKE, SMOKE_NOTE, UNMEASURED_NOTE
from .spec import FULL_FOLDER, TASK_FILE, Task, TaskSpecError, load_task
from .terminal_lines import write_whole_line

BENCH_KEY = pytest.StashKey["BenchConfig | None"]()
# how an item's run is carried out: runner.execute here, a Slurm job's result under --slurm
EXECUTE_KEY = pytest.StashKey["Callable[..., RunOutcome]"]()
# the controller's live display (progress.LiveDisplay), absent under -q and in xdist workers
LIVE_KEY = pytest.StashKey["LiveDisplay"]()
RUN_DIR_PROPERTY = "fmlbench_run_dir"
REUSED_PROPERTY = "fmlbench_reused"
RESUMED_PROPERTY = "fmlbench_resumed_after_step"
NO_AGENT = "no --agent given: benchmark tasks run only with --agent=NAME"


def leave_out_unchosen_full_tasks(config: pytest.Config, items: list[pytest.Item]) -> int:
    """Without an explicit choice the small profile runs: full-profile items need data and GPUs.

    A full-profile item stays when the user chose it: a marker expression (``-m full``, ``-m lite``: the
    expression then decides), a keyword expression naming ``full`` or a path inside a ``full/`` folder.
    Returns how many were left out (reported as deselected, as ``-m`` would).
    """
    if config.getoption("markexpr", "") or "full" in (config.getoption("keyword", "") or ""):
        return 0
    chosen_paths = [Path(arg.split("::")[0]).resolve() for arg in config.args]
    left_out, kept = [], []
    for item in items:
        task = getattr(item, "task", None)
        is_full = task is not None and task.spec.profile == "full"
        # the full folder itself or its task.yaml named on the command line (not a folder above it)
        named = is_full and any(path == item.path or item.path in path.parents for path in chosen_paths)
        (left_out if is_full and not named else kept).append(item)
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = kept
    return len(left_out)


class BenchmarkFailure(Exception):
    """A benchmark outcome that fails the item (integrity, constraint, no test result); one line."""


class TaskDirectory(pytest.Directory):
    def collect(self):
        try:
            task = load_task(self.path / TASK_FILE)
        except TaskSpecError as exc:
            raise self.CollectError(str(exc)) from None
        spec = task.spec
        marks = [spec.profile, spec.domain, *spec.markers] + (["gpu"] if spec.resources.gpus else [])
        for mark in dict.fromkeys(marks):
            self.config.addinivalue_line("markers", f"{mark}: FML-bench tasks marked {mark}")
        for seed in range(self.config.getoption("seeds")):
            item = TaskItem.from_parent(self, name=f"{spec.id}[seed{seed}]", task=task, seed=seed)
            for mark in dict.fromkeys(marks):
                item.add_marker(mark)
            if self.config.stash.get(BENCH_KEY, None) is None:
                item.add_marker(pytest.mark.skip(reason=NO_AGENT))
            yield item
        full = self.path / FULL_FOLDER
        if spec.profile == "small" and (full / TASK_FILE).is_file():
            # the task at the original's scale, a task of its own (id <id>_full, marker full)
            yield TaskDirectory.from_parent(self, path=full)

    def repr_failure(self, excinfo):
        if isinstance(excinfo.value, self.CollectError):
            return str(excinfo.value.args[0])
        return super().repr_failure(excinfo)


class TaskItem(pytest.Item):
    def __init__(self, *, task: Task, seed: int, **kwargs):
        super().__init__(**kwargs)
        self.task = task
        self.seed = seed
        self.outcome: RunOutcome | None = None

    def reportinfo(self):
        return self.path / TASK_FILE, 0, f"{self.task.id}[seed{self.seed}]"

    def setup(self) -> None:
        # the whole run happens in setup: a crash of the harness or the agent then reports as an error,
        # while a broken contract (integrity, constraint) fails the test in runtest
        bench = self.config.stash[BENCH_KEY]
        if EXECUTE_KEY not in self.config.stash:  # under --slurm the item's job decides (slurm/job.py)
            refused = session_budget.refusal(bench.settings.out_dir, lambda: session_budget.run_is_final(
                bench.settings, self.task, self.seed))
            if refused:
                pytest.skip(refused)
        attempts = failure_causes.attempts(self.config)
        for attempt in range(1, attempts + 1):
            try:
                run = self.config.stash.get(EXECUTE_KEY, execute)
                # a retry after an infrastructure failure resumes the run from its recorded steps
                again = {"fresh": False} if attempt > 1 else {}
                self.outcome = run(self.task, self.seed, replace(bench.settings, announce=self._announce,
                                                                 show_progress=self._show_progress, **again))
                break
            except RunError as exc:
                self._record_from_disk(bench)
                cause = failure_causes.cause_of_error(exc, bench.settings.out_dir, self.task, self.seed,
                                                      bench.settings)
                failure_causes.FailureLog(bench.settings.out_dir).note(self.outcome_id(), cause, str(exc))
                self.user_properties[:] = [(k, v) for k, v in self.user_properties if k != failure_causes.PROPERTY]
                self.user_properties.append((failure_causes.PROPERTY, cause))
                if cause != "infra" or attempt == attempts:
                    raise
                reporter = self.config.pluginmanager.get_plugin("terminalreporter")
                if reporter is not None and not hasattr(self.config, "workerinput"):
                    with self._capture_off():
                        write_whole_line(reporter, f"[fmlbench] {self.name}: failed for the infrastructure "
                                         f"({str(exc).splitlines()[0]}); attempt {attempt + 1} of {attempts}, "
                                         "resuming from its recorded steps", yellow=True)
        # every run is audited (cheap signals; the judges with --fmlbench-judge, replayed on a rerun)
        audit_run(self.outcome.store.dir, self.task.spec, bench.judge, record=self.outcome.record)
        self._record_properties(self.outcome.record, self.outcome.store.dir, self.outcome.reused)
        failure_causes.FailureLog(bench.settings.out_dir).note(
            self.outcome_id(), failure_causes.cause_of_record(self.outcome.record), self.outcome.record.stop_reason)

    def _announce(self, line: str) -> None:
        """A line the user needs now (an external agent's socket), past the capture of this item's output."""
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None or hasattr(self.config, "workerinput"):
            return  # an xdist worker's output is not shown: the controller prints it from the live file
        if self.config.stash.get(LIVE_KEY, None) is not None:
            self._show_progress()  # the display shows it from the live file, once
            return
        with self._capture_off():
            write_whole_line(reporter, line)  # spelt out: the line may quote an agent's words

    def _show_progress(self) -> None:
        """The live display runs in this process (no -n, no --slurm): it shows the run's progress now."""
        live = self.config.stash.get(LIVE_KEY, None)
        if live is not None and not hasattr(self.config, "workerinput"):
            with self._capture_off():
                live.pump()

    def _capture_off(self):
        capman = self.config.pluginmanager.get_plugin("capturemanager")
        return capman.global_and_fixture_disabled() if capman is not None else nullcontext()

    def _record_from_disk(self, bench) -> None:
        _, run_dir = run_dir_for(bench.settings, self.task, self.seed)
        store = RunStore(run_dir)
        if store.exists():
            try:
                record = store.load()
            except RecordUnreadable:
                return  # the run's own error says so in one line; there is nothing to record
            if record.steps_used:
                audit_run(run_dir, self.task.spec, bench.judge, record=record)
            self._record_properties(record, run_dir, False)

    def _record_properties(self, record: RunRecord, run_dir: Path, reused: bool) -> None:
        test_ni = ni_test(record)
        smoke = record.scale == SMOKE
        # a full task whose baseline is unmeasured (source: unmeasured) has no NI until it is measured
        unmeasured = record.baseline_test is None
        note = SMOKE_NOTE if smoke else UNMEASURED_NOTE if unmeasured else None
        properties = {
            "task": record.task, "agent": record.agent, "model": record.model or "none",
            "provider": record.provider or "none", "seed": record.seed, "steps": record.steps_used,
            "baseline_val": "unmeasured" if record.baseline_val is None else record.baseline_val,
            "baseline_test": "unmeasured" if record.baseline_test is None else record.baseline_test,
            "best_val": _num(record.best_val), "final_val": _num(record.final_val),
            "test_metric": _num(record.test_metric),
            # a smoke run is a check of the code path: no NI against the original's declared baselines
            "normalized_improvement": "" if note else "nan" if math.isnan(test_ni) else test_ni,
            "scale": record.scale or "none",
            **({"note": note} if note else {}),
            "valid_step_ratio": record.valid_steps / record.steps_used if record.steps_used else "nan",
            "step_completion_rate": record.steps_used / record.steps_budget if record.steps_budget else "nan",
            "end_reason": record.end_reason or "none",
            "llm_failed_calls": record.llm_failed_calls,
            "llm_truncated_calls": record.llm_truncated_calls,
            "tokens_total": record.usage.total_tokens,
            "cost_usd": "unknown" if record.usage.cost_usd is None else round(record.usage.cost_usd, 6),
            "wall_clock_s": round(record.wall_clock_s, 3), "integrity": record.integrity,
            failure_causes.PROPERTY: failure_causes.cause_of_record(record) or "none",
            "human": str(record.human).lower(),
            **({"human_active_s": round(record.human_active_s, 1)} if record.human_active_s is not None else {}),
            "status": record.status, "constraint_violated": str(record.constraint_violated).lower(),
            "sandbox": record.sandbox or "unknown", "agent_process": record.agent_process or "unknown",
            RUN_DIR_PROPERTY: str(run_dir), REUSED_PROPERTY: str(reused).lower(),
            RESUMED_PROPERTY: record.resumed_from_step if record.resumed_from_step and not reused else 0,
            **audit_properties(record),
        }
        self.user_properties[:] = [(k, v) for k, v in self.user_properties if k not in properties]
        self.user_properties.extend(properties.items())

    def runtest(self) -> None:
        record = self.outcome.record
        if record.integrity == "violated":
            raise BenchmarkFailure(f"{record.task}: " + "; ".join(record.integrity_violations))
        if record.constraint_violated:
            broken = [c for c in record.test_constraints if not c.ok]
            raise BenchmarkFailure(f"{record.task}: constraint broken on test: " + "; ".join(
                f"{c.name}: {c.detail or f'{c.value} vs limit {c.limit}'}" for c in broken))
        if record.test_error:
            raise BenchmarkFailure(f"{record.task}: no test result: {record.test_error.splitlines()[0]}")

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, (BenchmarkFailure, RunError, RunBusy)):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style)

    # setup errors are rendered by this method in pytest; keep harness/agent crashes to their message
    # (the full traceback is in the run record)
    def _repr_failure_py(self, excinfo, style=None):
        if isinstance(excinfo.value, (RunError, RunBusy)):
            cause = excinfo.value.__cause__
            detail = f"\n(details: {self.outcome_dir()}/record.json)" if cause is not None else ""
            return f"{excinfo.value}{detail}"
        return super()._repr_failure_py(excinfo, style)

    def outcome_id(self) -> str:
        return run_dir_for(self.config.stash[BENCH_KEY].settings, self.task, self.seed)[0]

    def outcome_dir(self) -> str:
        bench = self.config.stash.get(BENCH_KEY, None)
        return str(run_dir_for(bench.settings, self.task, self.seed)[1]) if bench else "?"


def _num(value: float | None) -> float | str:
    return "nan" if value is None else value


def collect_task_directory(path: Path, parent: pytest.Collector) -> TaskDirectory | None:
    if (path / TASK_FILE).is_file():
        return TaskDirectory.from_parent(parent, path=path)
    return None
