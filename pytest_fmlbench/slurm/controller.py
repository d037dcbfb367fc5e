"""Controller side: submit the items as job arrays at the start, look at their states at most once per
--slurm-poll (for the items, the watchdog and the live display alike), wait per item, cancel on Ctrl-C."""

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
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import pytest
import submitit
from submitit.core.utils import pickle_load

from ..collect import EXECUTE_KEY, LIVE_KEY, TaskItem
from ..interrupts import first_press_ends_session
from ..progress import JOBS_DIR, LIVE_DIR
from ..record import RecordUnreadable, RunStore
from ..runner import FINAL_STATUSES, RunBusy, RunError, RunOutcome, execute, run_dir_for
from . import cluster
from .config import FORWARDED, SlurmConfig
from .job import NOT_RUN, ItemJob, JobSpec
from .registry import JobRegistry

# how often a waiting item looks for its job's result file (the filesystem, not the scheduler)
RESULT_CHECK_S = 0.5
# a job seen in a final state without a result gets this long for its result file to appear (shared filesystems lag)
RESULT_GRACE_S = 10.0
# a job in a state in which Slurm will not run it by itself (held, a dependency that can never be met, no
# node that can run it): reported once it lasts this long (a requeue passes through such states) ...
STUCK_REPORT_S = 3.0
# ... and its item fails once it lasts this long (a job Slurm held is first released, once, when a node can run it)
STUCK_GRACE_S = 20.0


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
        self.run_of: dict[str, str] = {}  # job id (an array's task: ARRAY_TASK) -> run id
        self.submissions = 0  # sbatch calls of this session
        self.failed: set[str] = set()  # run ids whose job failed in this session (another attempt resubmits)
        self.written: dict[str, str] = {}  # run id -> what its live file says now
        self.last_poll: float | None = None  # when the scheduler was last asked (time.monotonic)
        self.polls = 0
        self.items: dict[str, str] = {}  # run id -> item name
        self.attached: set[str] = set()
        self.state: dict[str, str] = {}  # job id -> state
        self.info: dict[str, cluster.JobInfo] = {}  # job id -> what scontrol said last
        # jobs that will not run by themselves; seen once per poll, so a long poll leaves a person one more look
        # (at least) between the job's one-line notice and its cancelling, to release or resume it
        self.watchdog = Watchdog(grace_s=max(STUCK_GRACE_S, STUCK_REPORT_S + 2 * slurm.poll_s))
        self.notices: list[str] = []  # lines for the terminal, written by the main thread while items wait
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.live_lock = threading.Lock()
        self.watcher: threading.Thread | None = None
        self.cancelled: list[str] = []
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
        recorded = {run_id: known[run_id] for run_id in (self._run_id(item) for item in items) if run_id in known}
        alive = cluster.jobs(sorted(set(recorded.values()))) if recorded else {}
        dropped: list[str] = []
        to_submit: dict[str, list[TaskItem]] = {}  # the request (resources, time, options) -> its items
        try:
            for item in items:
                run_id, run_dir = run_dir_for(self.bench.settings, item.task, item.seed)
                self.items[run_id] = item.name
                if not self.bench.settings.fresh and _final(run_dir, self.bench.settings.budget):
                    continue  # collected from its record, locally
                job_id = known.get(run_id)
                if job_id and job_id in alive and alive[job_id].state in cluster.ACTIVE:
                    held = cluster.stuck(alive[job_id], None)
                    if held is None or held.kind == cluster.NO_NODE:
                        self._track(run_id, submitit.SlurmJob(folder=self.folder, job_id=job_id))
                        self.attached.add(run_id)
                        continue
                    # held or never to run: a new job resumes the run from its recorded steps instead
                    cluster.cancel([job_id])
                    dropped.append(f"{job_id} ({alive[job_id].state}, {alive[job_id].reason}: {held.why})")
                request = {k: v for k, v in self._request(item).items() if k != "job_name"}
                to_submit.setdefault(json.dumps(request, sort_keys=True, default=str), []).append(item)
            self._submit_arrays(to_submit, registry)
        except BaseException:
            self.cancel_all()
            raise
        with self.lock:
            self.state.update(cluster.states([job.job_id for job in self.jobs.values()]))
        self.last_poll = time.monotonic()
        self._write_live()
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None and dropped:
            reporter.write_line(f"[fmlbench] slurm: cancelled recorded job(s) that would not run by themselves, "
                                f"submitted afresh: {'; '.join(dropped)}", yellow=True)
        if reporter is not None and self.config.get_verbosity() >= 0:
            submitted = len(self.jobs) - len(self.attached)
            reporter.write_line(f"[fmlbench] slurm: submitted {submitted} job(s), re-attached to "
                                f"{len(self.attached)}; {self.submissions} submission(s) (job arrays); "
                                f"job files in {self.folder}/")
        if not self.slurm.detach:
            self.watcher = threading.Thread(target=self._watch, name="fmlbench-slurm", daemon=True)
            self.watcher.start()

    def _run_id(self, item: TaskItem) -> str:
        return run_dir_for(self.bench.settings, item.task, item.seed)[0]

    def _track(self, run_id: str, job: submitit.SlurmJob) -> None:
        self.jobs[run_id] = job
        self.run_of[job.job_id] = run_id

    def _submit_arrays(self, to_submit: dict[str, list[TaskItem]], registry: JobRegistry) -> None:
        """One sbatch per group of items asking for the same resources, each group cut to the cluster's
        MaxArraySize: the scheduler's work no longer grows with the item count."""
        if not to_submit:
            return
        size = cluster.max_array_size()
        executor = self._executor()
        for group in to_submit.values():
            for first in range(0, len(group), size):
                batch = group[first:first + size]
                request = self._request(batch[0])
                tasks = {item.task.spec.id for item in batch}
                request["job_name"] = f"fmlbench-{tasks.pop()}" if len(tasks) == 1 else "fmlbench"
                # every task may run at once unless the user throttles the array (--slurm-opt array_parallelism=K)
                request.setdefault("array_parallelism", len(batch))
                executor.update_parameters(**request)
                with _interrupt_deferred():
                    jobs = executor.submit_array([ItemJob(self._spec(item)) for item in batch])
                    self.submissions += 1
                    ids = {self._run_id(item): job for item, job in zip(batch, jobs)}
                    for run_id, job in ids.items():
                        self._track(run_id, job)
                    registry.record_many({run_id: job.job_id for run_id, job in ids.items()})

    def _executor(self) -> cluster.SlurmExecutor:
        # the job runs this interpreter (same virtual environment, on the shared filesystem)
        executor = cluster.SlurmExecutor(folder=self.folder, max_num_timeout=3, python=sys.executable)
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
        if run_id in self.failed:
            # another attempt (--retry-infra) after its job failed: a new job resumes the run from its steps
            job = self._resubmit(run_id, task, seed)
        try:
            return self._collect(job, run_id)
        except RunError:
            self.failed.add(run_id)
            raise

    def _collect(self, job: submitit.SlurmJob, run_id: str) -> RunOutcome:
        capture = self.config.pluginmanager.getplugin("capturemanager")
        try:
            # the live display writes from its thread while this item waits with capture off (and only
            # then: a line written into the item's captured output would be lost)
            live = self.config.stash.get(LIVE_KEY, None)
            with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext(), \
                    live.shown() if live is not None else contextlib.nullcontext():
                result = self._wait(job)
            self._write_live()
        except KeyboardInterrupt:
            self.cancel_all()
            raise
        if result.get("kind") == NOT_RUN:
            pytest.skip(result["error"])
        if result.get("error"):
            raise (RunBusy if result.get("kind") == "RunBusy" else RunError)(result["error"])
        store = RunStore(Path(result["run_dir"]))
        try:
            return RunOutcome(store.load(), store, reused=bool(result.get("reused")))
        except RecordUnreadable as exc:
            raise RunError(str(exc)) from None

    def _resubmit(self, run_id: str, task, seed: int) -> submitit.SlurmJob:
        item = SimpleNamespace(task=task, seed=seed)
        executor = self._executor()
        executor.update_parameters(**self._request(item))
        with _interrupt_deferred():
            job = executor.submit(ItemJob(self._spec(item).with_fresh(False)))
            self.submissions += 1
            self._track(run_id, job)
            JobRegistry(self.folder).record(run_id, job.job_id)
        self.failed.discard(run_id)
        return job

    def _wait(self, job: submitit.SlurmJob) -> dict:
        terminal_since = None
        while True:
            self._write_notices()
            if job.paths.result_pickle.exists():
                outcome, value = pickle_load(job.paths.result_pickle)
                if outcome == "success":
                    return value
                last = str(value).strip().splitlines()[-1] if str(value).strip() else "no traceback"
                raise _infra(f"Slurm job {job.job_id} FAILED: {last} (log: {job.paths.stderr})")
            if (self.watcher is None or not self.watcher.is_alive()) and self._poll_due():
                self._poll([job.job_id])
                self._write_notices()
            with self.lock:
                state = self.state.get(job.job_id)
            dead = self.watchdog.dead.get(job.job_id)
            if dead:
                raise _infra(dead)
            if state is not None and state not in cluster.ACTIVE:
                terminal_since = terminal_since or time.monotonic()
                if time.monotonic() - terminal_since > RESULT_GRACE_S:
                    raise _infra(f"Slurm job {job.job_id} is {state} without a result (log: {job.paths.stderr}); "
                                 "run the same command again to resume from its recorded steps")
            else:
                terminal_since = None
            time.sleep(RESULT_CHECK_S)

    def _write_notices(self) -> None:
        """Lines about jobs that will not run by themselves: from the main thread, shown also under -q."""
        with self.lock:
            lines, self.notices[:] = list(self.notices), []
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        for line in lines:
            if reporter is not None:
                reporter.ensure_newline()
                reporter.write_line(line, yellow=True)
                reporter.flush()
            else:
                print(line, file=sys.stderr, flush=True)

    # ---- jobs that will not run by themselves
    def _poll_due(self) -> bool:
        """Whether the session may ask the scheduler again (at most once per --slurm-poll)."""
        now = time.monotonic()
        if self.last_poll is not None and now - self.last_poll < self.slurm.poll_s:
            return False
        self.last_poll = now
        return True

    def _poll(self, job_ids: list[str]) -> None:
        """Job states; a job in a state in which Slurm will not run it is reported, released or given up."""
        if not job_ids:
            return
        found = cluster.jobs(job_ids)
        self.polls += 1
        # node states only where a job of the session waits in a partition in which none of its jobs runs:
        # while one runs there, a node can run them (and sinfo is two more requests to the scheduler)
        waiting = {p for info in found.values() if info.state in cluster.WAITING for p in info.partitions or ("",)}
        running = {p for info in found.values() if info.state == "RUNNING" for p in info.partitions}
        partition_nodes = cluster.nodes() if waiting - running else None
        now = time.monotonic()
        with self.lock:
            self.state.update({jid: info.state for jid, info in found.items()})
            self.info.update(found)
        for jid, info in found.items():
            if jid in self.cancelled:
                continue
            job = self.jobs.get(self.run_of.get(jid, ""))
            for line in self.watchdog.check(info, partition_nodes, now, name=self._name(jid),
                                            log=str(job.paths.stderr) if job is not None else "?"):
                self._notice(line)
            if jid in self.watchdog.dead:
                with self.lock:
                    self.cancelled.append(jid)

    def _name(self, job_id: str) -> str:
        run_id = self.run_of.get(job_id)
        return self.items.get(run_id, f"job {job_id}") if run_id else f"job {job_id}"

    def _notice(self, line: str) -> None:
        with self.lock:
            self.notices.append(line)

    # ---- job states for the live display
    def _watch(self) -> None:
        """One look at the session's unfinished jobs per --slurm-poll, for the items, the watchdog and the live
        display alike."""
        while True:
            if self._poll_due():
                try:
                    pending = [j.job_id for j in self.jobs.values() if not j.paths.result_pickle.exists()]
                    self._poll(pending)
                    self._write_live()
                except Exception:  # a display thread must never end the session
                    pass
            if self.stop.wait(min(self.slurm.poll_s, RESULT_CHECK_S * 4)):
                return

    def _write_live(self) -> None:
        # the watcher thread and the main thread (after each item, at the end) both write: one at a time,
        # or one's rename of the shared temporary file would fail under the other
        with self.live_lock:
            self._write_live_files()

    def _write_live_files(self) -> None:
        folder = self.out / LIVE_DIR / JOBS_DIR
        folder.mkdir(parents=True, exist_ok=True)
        for run_id, job in self.jobs.items():
            done = job.paths.result_pickle.exists()
            with self.lock:
                state = "done" if done else self.state.get(job.job_id, "?")
                info = self.info.get(job.job_id)
            if not done and info is not None and self.watchdog.reported(job.job_id):
                state = f"{state} ({info.reason})"  # e.g. PENDING (JobHeldAdmin)
            text = json.dumps({"item": self.items.get(run_id, run_id), "job_id": job.job_id, "state": state,
                               "steps_total": self.bench.settings.steps})
            if self.written.get(run_id) == text:
                continue  # a thousand items: only the files whose job changed are written again
            path = folder / f"{run_id}.json"
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_text(text)
            os.replace(tmp, path)
            self.written[run_id] = text

    # ---- Ctrl-C and the end of the session
    def cancel_all(self) -> None:
        ids = [job.job_id for job in self.jobs.values()
               if job.job_id not in self.cancelled and not job.paths.result_pickle.exists()]
        with _presses_dropped():
            cluster.cancel(ids)
        self.cancelled += ids

    def pytest_keyboard_interrupt(self, excinfo) -> None:
        if self.slurm.detach:
            return
        self.cancel_all()
        if self.stop.is_set() and not self.cancelled:
            return  # the items had ended: nothing ran to cancel, and the session's end says it was cut short
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            ids = ", ".join(self.cancelled) or "none running"
            reporter.write_line(f"[fmlbench] Ctrl-C: cancelled this session's Slurm jobs ({ids}); run the same "
                                "command again to resume from their recorded steps", red=True, bold=True)

    # before the live display's own final look (plugin.py), so that it shows every job's last state
    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        self.stop.set()
        if self.watcher is not None:
            self.watcher.join(timeout=5)
        if not self.slurm.detach:
            self._write_live()


@dataclass
class _Stuck:
    kind: str  # cluster.SLURM_HELD, HELD, NEVER or NO_NODE
    since: float
    reported: bool = False


class Watchdog:
    """Jobs in a state in which Slurm will not run them by itself (held, a dependency that can never be met,
    no node that can run them): each is reported in one line once the state lasts STUCK_REPORT_S; a job
    that Slurm itself held after a failed launch is released, at most once, when a node can run it; any
    other such job (or one held again after its release) is cancelled once the state lasts ``grace_s``,
    and its item fails with the reason, so that the same command resumes the run in a new job.
    """

    def __init__(self, grace_s: float = STUCK_GRACE_S) -> None:
        self.grace_s = grace_s
        self.seen: dict[str, _Stuck] = {}
        self.released: set[str] = set()
        self.dead: dict[str, str] = {}  # job id -> its item's failure (the job was cancelled)

    def reported(self, job_id: str) -> bool:
        seen = self.seen.get(job_id)
        return job_id in self.dead or (seen is not None and seen.reported)

    def check(self, info: cluster.JobInfo, partition_nodes, now: float, name: str, log: str) -> list[str]:
        """One look at one job; returns the lines to show."""
        jid = info.job_id
        why = cluster.stuck(info, partition_nodes)
        if jid in self.dead or why is None:
            self.seen.pop(jid, None)
            return []
        seen = self.seen.get(jid)
        if seen is None or seen.kind != why.kind:
            seen = self.seen[jid] = _Stuck(why.kind, now)
        lasted = now - seen.since
        if lasted < STUCK_REPORT_S:
            return []
        what = f"Slurm job {jid} is {info.state} ({info.reason}): {self._why(jid, why)}"
        if why.kind == cluster.SLURM_HELD and jid not in self.released and why.node_usable is not False:
            # Slurm held it after a failed launch and a node can run it (again): released, once
            if cluster.release(jid):
                self.released.add(jid)
                self.seen.pop(jid, None)
                return [f"[fmlbench] {name}: {what}; released it (once), a node of its partition can run it"]
        lines = []
        if not seen.reported:
            seen.reported = True
            left = max(0, math.ceil(self.grace_s - lasted))
            lines.append(f"[fmlbench] {name}: {what}; it will not run by itself: the item fails in {left} s "
                         "unless its state changes")
        if lasted >= self.grace_s:
            cluster.cancel([jid])
            self.dead[jid] = (f"{what}; it will not run by itself, so it was cancelled (log: {log}); run the same "
                              "command again to resume from its recorded steps")
        return lines

    def _why(self, jid: str, why: cluster.Stuck) -> str:
        text = why.why
        if why.kind == cluster.SLURM_HELD and jid in self.released:
            text += ", again after its one release"
        if why.nodes and why.node_usable is False:
            text += f" ({why.nodes})" if why.kind == cluster.NO_NODE else f"; no node can run it now ({why.nodes})"
        return text


def _infra(message: str) -> RunError:
    """The item's failure where its job, not its run, ended it (lost, cancelled, held, out of time or memory)."""
    error = RunError(message)
    error.failure_cause = "infra"
    return error


@contextlib.contextmanager
def _presses_dropped():
    """While the session's jobs are cancelled: a second Ctrl-C (an impatient one) must not stop the cancelling
    half-way, and the session ends anyway."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


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
            first_press_ends_session(signal.SIGINT, None)


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
