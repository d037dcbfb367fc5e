"""Controller side: submit every item's job at the start, show job states, wait per item, cancel on Ctrl-C."""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest
import submitit
from submitit.core.utils import pickle_load

from ..collect import BENCH_KEY, EXECUTE_KEY, TaskItem
from ..progress import JOBS_DIR, LIVE_DIR
from ..record import RunStore
from ..runner import FINAL_STATUSES, RunBusy, RunError, RunOutcome, execute, run_dir_for
from . import cluster
from .job import ItemJob, JobSpec
from .options import FORWARDED, SlurmConfig
from .registry import JobRegistry

POLL_S = 1.0
# a job seen in a final state without a result gets this long for its result file to appear (shared filesystems lag)
RESULT_GRACE_S = 10.0


class SlurmDetached(Exception):
    """--slurm-detach: the item's job was submitted (or is running); nothing to wait for now."""


class SlurmController:
    def __init__(self, config: pytest.Config, bench, slurm: SlurmConfig, invocation_dir: Path):
        self.config = config
        self.bench = bench
        self.slurm = slurm
        self.invocation_dir = invocation_dir
        self.out = bench.settings.out_dir
        self.folder = self.out / slurm.folder_name
        self.jobs: dict[str, submitit.SlurmJob] = {}  # run id -> job
        self.items: dict[str, str] = {}  # run id -> item name
        self.attached: set[str] = set()
        self.state: dict[str, str] = {}  # job id -> state
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.watcher: threading.Thread | None = None
        self.cancelled: list[str] = []
        _make_interruptible()
        # submitit warns on every sacct call of a cluster without accounting; states come from scontrol here
        logging.getLogger("submitit").setLevel(logging.ERROR)
        config.stash[EXECUTE_KEY] = self.run_item

    # ---- submission, when the selection is known
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if self.config.getoption("collectonly"):
            return
        items = [item for item in session.items if isinstance(item, TaskItem)
                 and not any(m.name in ("skip", "skipif") for m in item.iter_markers())]
        if not items:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        registry = JobRegistry(self.folder)
        known = registry.load()
        alive = cluster.states(sorted(set(known.values())))
        executor = self._executor()
        try:
            for item in items:
                run_id, run_dir = run_dir_for(self.bench.settings, item.task, item.seed)
                self.items[run_id] = item.name
                if not self.bench.settings.fresh and _final(run_dir, self.bench.settings.budget):
                    continue  # collected from its record, locally
                job_id = known.get(run_id)
                if job_id and alive.get(job_id) in cluster.ACTIVE:
                    self.jobs[run_id] = submitit.SlurmJob(folder=self.folder, job_id=job_id)
                    self.attached.add(run_id)
                    continue
                executor.update_parameters(**self._request(item))
                with _interrupt_deferred():
                    job = executor.submit(ItemJob(self._spec(item)))
                    self.jobs[run_id] = job
                    registry.record(run_id, job.job_id)
        except BaseException:
            self.cancel_all()
            raise
        with self.lock:
            self.state.update(cluster.states([job.job_id for job in self.jobs.values()]))
        self._write_live()
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None and self.config.get_verbosity() >= 0:
            submitted = len(self.jobs) - len(self.attached)
            reporter.write_line(f"[fmlbench] slurm: submitted {submitted} job(s), re-attached to "
                                f"{len(self.attached)}; job files in {self.folder}/")
        if not self.slurm.detach:
            self.watcher = threading.Thread(target=self._watch, name="fmlbench-slurm", daemon=True)
            self.watcher.start()

    def _executor(self) -> submitit.SlurmExecutor:
        # the job runs this interpreter (same virtual environment, on the shared filesystem)
        executor = submitit.SlurmExecutor(folder=self.folder, max_num_timeout=3, python=sys.executable)
        return executor

    def _spec(self, item: TaskItem) -> JobSpec:
        options = {dest: self.config.getoption(dest) for dest in FORWARDED}
        return JobSpec(task_root=str(item.task.root), seed=item.seed, options=options,
                       invocation_dir=str(self.invocation_dir))

    def _request(self, item: TaskItem) -> dict:
        spec = item.task.spec
        res = spec.resources
        per_run = spec.expected_duration_s or spec.timeout_s
        # steps + the final validation and test, twice the expected time, plus setup
        minutes = math.ceil((self.bench.settings.steps + 2) * per_run * 2 / 60) + 10
        request: dict = {"job_name": f"fmlbench-{spec.id}-seed{item.seed}", "time": self.slurm.time_min or minutes,
                         "cpus_per_task": res.cpus, "ntasks_per_node": 1, "nodes": 1}
        if res.gpus:
            request["gpus_per_node"] = res.gpus
        if res.memory_mb:
            # the experiment's limit plus the harness and the agent beside it
            request["mem"] = f"{res.memory_mb + 2048}MB"
        if self.slurm.partition:
            request["partition"] = self.slurm.partition
        request.update(self.slurm.opts)
        return request

    # ---- each item waits for its own job
    def run_item(self, task, seed: int, settings) -> RunOutcome:
        run_id, run_dir = run_dir_for(settings, task, seed)
        job = self.jobs.get(run_id)
        if job is None:
            return execute(task, seed, settings)  # finished earlier: reused from its record
        if self.slurm.detach:
            state = self.state.get(job.job_id, "?")
            verb = "re-attached to" if run_id in self.attached else "submitted"
            pytest.skip(f"--slurm-detach: {verb} Slurm job {job.job_id} ({state}); run the same command "
                        "again to collect it")
        capture = self.config.pluginmanager.getplugin("capturemanager")
        try:
            # the live display writes from its thread while this item waits: not into the item's captured output
            with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
                result = self._wait(job)
            self._write_live()
        except KeyboardInterrupt:
            self.cancel_all()
            raise
        if result.get("error"):
            raise (RunBusy if result.get("kind") == "RunBusy" else RunError)(result["error"])
        store = RunStore(Path(result["run_dir"]))
        return RunOutcome(store.load(), store, reused=bool(result.get("reused")))

    def _wait(self, job: submitit.SlurmJob) -> dict:
        terminal_since = None
        while True:
            if job.paths.result_pickle.exists():
                outcome, value = pickle_load(job.paths.result_pickle)
                if outcome == "success":
                    return value
                last = str(value).strip().splitlines()[-1] if str(value).strip() else "no traceback"
                raise RunError(f"Slurm job {job.job_id} FAILED: {last} (log: {job.paths.stderr})")
            with self.lock:
                state = self.state.get(job.job_id)
            if self.watcher is None or not self.watcher.is_alive():
                state = cluster.states([job.job_id])[job.job_id]
            if state is not None and state not in cluster.ACTIVE:
                terminal_since = terminal_since or time.monotonic()
                if time.monotonic() - terminal_since > RESULT_GRACE_S:
                    raise RunError(f"Slurm job {job.job_id} is {state} without a result (log: {job.paths.stderr}); "
                                   "run the same command again to resume from its recorded steps")
            else:
                terminal_since = None
            time.sleep(POLL_S / 2)

    # ---- job states for the live display
    def _watch(self) -> None:
        while not self.stop.wait(POLL_S):
            try:
                pending = [j.job_id for j in self.jobs.values() if not j.paths.result_pickle.exists()]
                found = cluster.states(pending)
                with self.lock:
                    self.state.update(found)
                self._write_live()
            except Exception:  # a display thread must never end the session
                continue

    def _write_live(self) -> None:
        folder = self.out / LIVE_DIR / JOBS_DIR
        folder.mkdir(parents=True, exist_ok=True)
        for run_id, job in self.jobs.items():
            done = job.paths.result_pickle.exists()
            state = "done" if done else self.state.get(job.job_id, "?")
            path = folder / f"{run_id}.json"
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_text(json.dumps({"item": self.items.get(run_id, run_id), "job_id": job.job_id,
                                       "state": state, "steps_total": self.bench.settings.steps}))
            os.replace(tmp, path)

    # ---- Ctrl-C and the end of the session
    def cancel_all(self) -> None:
        ids = [job.job_id for job in self.jobs.values()
               if job.job_id not in self.cancelled and not job.paths.result_pickle.exists()]
        cluster.cancel(ids)
        self.cancelled += ids

    def pytest_keyboard_interrupt(self, excinfo) -> None:
        if self.slurm.detach:
            return
        self.cancel_all()
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            ids = ", ".join(self.cancelled) or "none running"
            reporter.write_line(f"[fmlbench] Ctrl-C: cancelled this session's Slurm jobs ({ids}); run the same "
                                "command again to resume from their recorded steps", red=True, bold=True)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        self.stop.set()
        if self.watcher is not None:
            self.watcher.join(timeout=5)
        if not self.slurm.detach:
            self._write_live()


def _make_interruptible() -> None:
    """Ctrl-C must reach a controller that has jobs on a cluster, whatever its parent did to SIGINT.

    A disposition of "ignore" and a blocked SIGINT are inherited through fork and exec (a shell's
    background job, a test runner's worker, a supervisor); a controller started that way would run on
    after Ctrl-C and leave its jobs on the cluster.
    """
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGINT) in (signal.SIG_IGN, signal.SIG_DFL, None):
        signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


@contextlib.contextmanager
def _interrupt_deferred():
    """A Ctrl-C during one submission is taken once the job's id is recorded, so no job is left unknown."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pressed: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: pressed.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if pressed:
            raise KeyboardInterrupt


def _final(run_dir: Path, budget: dict) -> bool:
    """A run the runner would reuse as it is (the same rule as runner.execute)."""
    store = RunStore(run_dir)
    try:
        record = store.load() if store.exists() else None
    except Exception:
        return False
    if record is None or record.status not in FINAL_STATUSES:
        return False
    return not (record.status == "stopped" and record.budget != budget)
