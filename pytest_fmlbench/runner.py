"""One benchmark run: workspace -> agent loop -> final test on the best code -> run record.

Follows the original's protocol: the agent spends ``steps`` validation runs; then a fresh workspace
gets the best-validation code, validation is re-run, and the hidden test split is run once. The agent
never sees a test number.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from . import datacache, devices, isolation
from .datacache import DataCache, default_root
from .agent_host import host
from .agent_host.launcher import AgentLimits
from .agent_host.crash_site import agent_frame
from .agent_host.locate import AgentLocator, locate_class
from .agent_host.outcome import AgentOutcome, one_line
from .agent_host.needs import AgentNeeds, gateway_problem, needs_of
from .agentkit import Agent, AgentLoadError
from .executor import scrubbed_env, tail
from .isolation import warm
from .harness_session import HarnessSession
from .progress import LiveFile
from .reports.disclosure import run_hardware
from .reports.human_runs import active_seconds, is_human
from .record import RecordUnreadable, RunRecord, RunStore, now
from .safe_text import printable
from .spec import Task
from .workspace import HarnessError, IntegrityViolation, Workspace

# how much of the end of an agent's log is searched for its frame (its traceback is printed last)
LOG_TAIL_CHARS = 64_000
# statuses whose result is final: a re-run of the same command reuses them
FINAL_STATUSES = ("finished", "integrity_violated", "stopped")


class RunError(RuntimeError):
    """The harness or the agent crashed; the record is saved with status 'error'."""


class RunBusy(RuntimeError):
    """Another process is running the same run right now."""


# crashes whose line is the whole story (what to install), with no traceback worth pointing at
SELF_EXPLAINED = ("crashed: ToolMissing:",)

# how the agent is labelled where it did not run in its own sandboxed process
AGENT_IN_PROCESS = "in process"
AGENT_EXTERNAL = "external"


@dataclass(frozen=True)
class RunSettings:
    # None for a user's agent, which only its own process imports (agent_locator says where it is)
    agent_cls: type[Agent] | None
    agent_name: str
    agent_options: Any
    out_dir: Path
    steps: int
    model: str | None = None
    provider: str | None = None
    fresh: bool = False
    sandboxed: bool = True
    budget: dict[str, float | None] = field(default_factory=dict)
    # builds session.llm for one run; gets the run directory, where the LLM layer keeps its call ledger
    llm_factory: Callable[[RunRecord, Path], Any] | None = None
    log: Callable[[str], None] = field(default=lambda msg: None)
    # where run(session) executes: "process" (its own process, in the sandbox unless sandboxed is False),
    # "in process" (the harness's, --agent-in-process) or "external" (any program, --agent=external)
    agent_mode: host.AgentMode = "process"
    agent_locator: AgentLocator | None = None
    agent_limits: AgentLimits = AgentLimits()
    # commands fork from warm interpreters (isolation.warm); False: --cold-start. Results are the same
    # either way, so it is no part of the run's identity
    warm: bool = True
    # shows a line to the user at once, past pytest's output capture (set per item by the plugin)
    announce: Callable[[str], None] | None = None
    # the live display of this very process shows the run's progress file as it changes, past pytest's
    # output capture (set per item by the plugin where the display runs in the item's process)
    show_progress: Callable[[], None] | None = None
    # what the agent declared it needs (a working copy, an LLM gateway); None: read from agent_cls
    agent_needs: AgentNeeds | None = None
    # starts the LLM gateway a tool's model calls go through: (LLM client, socket path) -> a started gateway
    # (close(), protocol); None: the harness's own (agent_host.gateway_binding.start_gateway)
    gateway_factory: Callable[[Any, Path], Any] | None = None
    # full-profile tasks: "full" (the original's scale) or "smoke" (fixtures, a few batches); and the data
    # cache's root (None: $FMLBENCH_DATA or ~/.cache/fmlbench/data)
    scale: str = "full"
    data_root: Path | None = None

    def data_cache(self, task: Task) -> DataCache | None:
        if task.spec.profile != "full":
            return None
        return DataCache(self.data_root or default_root(), self.scale)  # type: ignore[arg-type]

    def identity(self, task: Task, seed: int) -> dict[str, Any]:
        return {
            "task": task.id, "task_version": task.spec.version, "task_fingerprint": task.fingerprint,
            "agent": self.agent_name, "agent_options": self.agent_options.model_dump(mode="json"),
            "model": self.model, "provider": self.provider, "seed": seed, "steps": self.steps,
            "sandbox": self.sandbox_label, "agent_process": self.agent_process_label,
        } | ({"scale": self.scale} if task.spec.profile == "full" else {})

    @property
    def sandbox_label(self) -> str:
        return isolation.SANDBOXED if self.sandboxed else isolation.UNSANDBOXED

    @property
    def agent_process_label(self) -> str:
        if self.agent_mode == "in process":
            return AGENT_IN_PROCESS
        if self.agent_mode == "external":
            return AGENT_EXTERNAL
        return self.sandbox_label

    @property
    def needs(self) -> AgentNeeds:
        if self.agent_needs is not None:
            return self.agent_needs
        # an external agent is another program: it declares nothing
        return needs_of(self.agent_cls) if self.agent_cls is not None and self.agent_mode != "external" else AgentNeeds()

    def locator(self) -> AgentLocator | None:
        if self.agent_mode != "process":
            return None
        return self.agent_locator or locate_class(self.agent_cls)


@dataclass
class RunOutcome:
    record: RunRecord
    store: RunStore
    reused: bool = False


def _slug(text: str | None) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text or "none").strip("-")[:60] or "none"


def run_dir_for(settings: RunSettings, task: Task, seed: int) -> tuple[str, Path]:
    ident = settings.identity(task, seed)
    digest = hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:12]
    name = f"{_slug(settings.agent_name)}__{_slug(settings.model)}__seed{seed}__{digest}"
    return digest, settings.out_dir / "runs" / task.id / name


def _data_identity(task: Task, cache: DataCache | None) -> dict[str, dict]:
    return {artifact.name: cache.identity(artifact) for artifact in task.spec.data} if cache is not None else {}


def _refuse_other_data(task: Task, seed: int, recorded: dict[str, dict], current: dict[str, dict]) -> None:
    """A run's recorded steps were measured on the data it recorded: resuming on other bytes would mix two
    data sets in one result."""
    changed = [name for name in sorted(set(recorded) | set(current))
               if {k: v for k, v in recorded.get(name, {}).items() if k != "pinned"}
               != {k: v for k, v in current.get(name, {}).items() if k != "pinned"}]
    if recorded and changed:
        raise RunError(f"{task.id} seed {seed}: the data differ from those its recorded steps were measured on "
                       f"({', '.join(changed)}): rerun with --fresh to start it again on these")


def execute(task: Task, seed: int, settings: RunSettings) -> RunOutcome:
    needs = settings.needs
    if needs.gateway:
        # known before any record is written: a run that could never start its tool's gateway
        provider = settings.provider if settings.llm_factory is not None else None
        problem = gateway_problem(needs, settings.agent_name, provider, _protocol_of(provider))
        if problem:
            raise RunError(f"{task.id}: {problem}")
    if settings.sandboxed:
        try:
            isolation.check_available()
        except isolation.SandboxUnavailable as exc:
            # before any record is written: nothing of an earlier run is touched
            raise RunError(f"{task.id}: {exc}") from None
    cache = settings.data_cache(task)
    if cache is not None:
        # every artefact there and intact, before any record: one line naming the command that fixes it
        missing = datacache.problem(task.id, task.spec.data, cache)
        if missing:
            raise RunError(missing)
    run_id, run_dir = run_dir_for(settings, task, seed)
    run_dir.mkdir(parents=True, exist_ok=True)
    lock = FileLock(run_dir / ".lock")
    try:
        lock.acquire(timeout=0)
    except Timeout:
        raise RunBusy(f"{task.id} seed {seed}: this run is in progress in another process ({run_dir})") from None
    try:
        return _execute_locked(task, seed, settings, run_id, RunStore(run_dir))
    finally:
        lock.release()


def _execute_locked(task: Task, seed: int, settings: RunSettings, run_id: str, store: RunStore) -> RunOutcome:
    prior_steps = []
    resumed = False  # a record of this run was there already: its steps and its LLM calls are replayed
    prior_baseline_run = None
    prior_wall = 0.0
    cache = settings.data_cache(task)
    data = _data_identity(task, cache)
    if store.exists() and settings.fresh:
        for child in store.dir.iterdir():
            if child.name != ".lock":
                shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()
    elif store.exists():
        try:
            previous = store.load()
            _refuse_other_data(task, seed, previous.data, data)
            budget_raised = previous.status == "stopped" and previous.budget != settings.budget
            if previous.status in FINAL_STATUSES and not budget_raised:
                return RunOutcome(previous, store, reused=True)
            prior_steps = store.load_steps()
            resumed = True
        except RecordUnreadable as exc:
            raise RunError(f"{task.id} seed {seed}: {exc}; rerun with --fresh to start it again") from None
        # a line torn by a kill is gone from the file too: the steps run from here follow the readable ones
        if store.steps_path.is_file():
            store.rewrite_steps(prior_steps)
        prior_baseline_run = previous.baseline_run
        prior_wall = previous.wall_clock_s

    spec = task.spec
    record = RunRecord(
        run_id=run_id, task=task.id, task_version=spec.version, task_fingerprint=task.fingerprint,
        domain=spec.domain, agent=settings.agent_name,
        agent_options=settings.agent_options.model_dump(mode="json"), model=settings.model,
        provider=settings.provider, seed=seed, steps_budget=settings.steps, metric_key=spec.metric.key,
        direction=spec.metric.direction, metric_transform=spec.metric.transform, baseline_val=spec.baseline.val, baseline_test=spec.baseline.test,
        norm_best=spec.normalization.best, norm_worst=spec.normalization.worst,
        devices=list(devices.assigned_gpus(max(1, spec.resources.gpus))),
        # 0 for a run stopped or killed before its first step was recorded: it is resumed all the same (the
        # calls it made are answered from its ledger, not paid again), only from no step
        resumed_from_step=len(prior_steps) if resumed else None, budget=settings.budget,
        sandbox=settings.sandbox_label, agent_process=settings.agent_process_label,
        scale=settings.scale if spec.profile == "full" else None, data=data, human=is_human(settings.agent_name),
    )
    record.hardware = run_hardware(record.devices)
    store.save(record)
    if prior_steps or prior_baseline_run:
        settings.log(f"{task.id} seed {seed}: resuming after {len(prior_steps)} recorded step(s)")
    started = time.monotonic()
    env = scrubbed_env(devices.experiment_env(spec.resources.gpus))

    def finish(status: str, **fields: Any) -> RunOutcome:
        for name, value in fields.items():
            setattr(record, name, value)
        record.status = status
        record.finished_at = now()
        record.wall_clock_s = prior_wall + time.monotonic() - started
        if record.human:
            record.human_active_s = active_seconds(store.load_steps())
        store.save(record)
        # after the record: the live display (agents' words pass through it) never keeps the result from it
        try:
            live.close()
        except Exception as exc:
            settings.log(f"{task.id} seed {seed}: the live progress file could not be closed: {exc!r}")
        return RunOutcome(record, store)

    # a smoke run's progress against the declared baseline is no result: its lines say smoke
    shown = f"{task.id}[seed{seed}]" + (" (smoke)" if record.scale == "smoke" else "")
    live = LiveFile(settings.out_dir, run_id, shown, settings.steps, spec.baseline.val,
                    spec.metric.direction, spec.normalization.scale(spec.baseline.val), settings.show_progress)
    live.update(action="preparing")
    pool = None
    try:
        if settings.warm:
            pool = warm.pool_for(task, store.logs, lambda line: settings.log(f"{task.id} seed {seed}: {line}"),
                                 settings.sandboxed, hidden=[task.root, store.dir, *([cache.root] if cache else [])],
                                 gpus=bool(env.get("CUDA_VISIBLE_DEVICES")))
        search = Workspace.create(task, store.dir / "search", env, store.logs, settings.sandboxed, pool, data=cache)
        search.check_sandbox_view()
        manifest = search.take_manifest()
        llm = settings.llm_factory(record, store.dir) if settings.llm_factory else None
        session = HarnessSession(spec, search, store, record, manifest, prior_steps=prior_steps,
                                 prior_baseline_run=prior_baseline_run, llm=llm, log=settings.log,
                                 progress=live.update)
        agent = host.drive(
            mode=settings.agent_mode, session=session, llm=llm, task=task, steps=settings.steps,
            agent_cls=settings.agent_cls, agent_options=settings.agent_options, locator=settings.locator(),
            sandboxed=settings.sandboxed, agent_limits=settings.agent_limits,
            hidden=[task.root, settings.out_dir, *([cache.root] if cache else [])], log_dir=store.logs,
            announce=lambda line: _announce(settings, live, f"{task.id}[seed{seed}]", line),
            needs=settings.needs, gateway_factory=settings.gateway_factory,
        )
        session.settle_usage()
        if agent.caught:
            record.caught_errors = list(agent.caught)
            more = f" (and {len(agent.caught) - 1} more)" if len(agent.caught) > 1 else ""
            _announce(settings, live, f"{task.id}[seed{seed}]",
                      f"the agent caught an exception in its main loop and went on, as its port does: "
                      f"{one_line(agent.caught[0])}{more}")
        problems = manifest.verify()
        if problems:
            raise IntegrityViolation(problems, "before the final test")
        # whatever ended the agent (host.drive makes every failure but these two an outcome), the best code
        # so far gets its final test (the original's protocol)
        live.update(action="final test")
        _final_test(task, session, store, record, env, manifest, settings.sandboxed, pool, cache)
    except IntegrityViolation as exc:
        return finish("integrity_violated", integrity="violated", integrity_violations=exc.problems,
                      error=str(exc))
    except isolation.SandboxUnavailable as exc:
        finish("error", error=str(exc))
        raise RunError(f"{task.id}: {exc}") from None
    except (HarnessError, OSError) as exc:
        finish("error", error=f"{type(exc).__name__}: {exc}")
        raise RunError(f"{task.id}: harness error: {exc}") from exc
    except Exception as exc:
        # the agent's failures are outcomes by now (host.drive): this is the harness's, before or in the final test
        tb = "".join(traceback.format_exception(exc, limit=-6))
        finish("error", error=tb[-4000:])
        raise RunError(f"{task.id}: harness error: {one_line(f'{type(exc).__name__}: {exc}')}") from exc
    finally:
        if pool is not None:
            pool.close()
    if agent.kind == "failed":
        head = f"agent {settings.agent_name} {agent.reason}\n"
        # the head names the failure (the tables' note reads it); the detail's end is where its cause is
        room = max(0, 4000 - len(head))
        finish("error", error=head + (agent.detail[-room:] if room else ""))
        raise RunError(_agent_failure(task, settings, agent, store, host.agent_log(store.logs, session)))
    if agent.kind == "stopped":
        return finish("stopped", stop_reason=agent.reason)
    return finish("finished", end_reason=agent.reason or None)


def _agent_failure(task: Task, settings: RunSettings, agent: AgentOutcome, store: RunStore, log: Path) -> str:
    """The failure's one line. Under a crash's: the agent's own frame, and the files that keep its whole
    traceback (the record's ``error``; its process's log, where the traceback is printed in full)."""
    line = f"{task.id}: agent {settings.agent_name} {agent.reason}"
    if not agent.reason.startswith("crashed") or agent.reason.startswith(SELF_EXPLAINED):
        # a limit, a timeout, a broken protocol, a tool to install: the line names it; the record keeps the rest
        return line
    lines = [line]
    in_log = settings.agent_mode == "process" and log.is_file()
    code = _agent_code(settings)
    # the log holds the whole traceback where the message's cut one lost the agent's frame
    frame = agent_frame(agent.detail, code) or (agent_frame(tail(log, LOG_TAIL_CHARS), code) if in_log else None)
    if frame is not None:
        lines.append(f"  in the agent's code: {frame}")
    kept = [store.record_path, *([log] if in_log else [])]
    lines.append(f"  traceback: {' and '.join(printable(path) for path in kept)}")
    return "\n".join(lines)


def _agent_code(settings: RunSettings) -> tuple[str, ...]:
    """The agent's own files and folders (an external agent is another program: none)."""
    if settings.agent_mode == "external" or (settings.agent_locator is None and settings.agent_cls is None):
        return ()
    try:
        return (settings.agent_locator or locate_class(settings.agent_cls)).code
    except AgentLoadError:  # a class no process can import ran in this one: its frames are not told apart
        return ()


def _protocol_of(provider: str | None) -> str | None:
    from .llm.providers import PROVIDERS

    known = PROVIDERS.get(provider or "")
    return known.protocol if known is not None else None


def _announce(settings: RunSettings, live: LiveFile, item: str, line: str) -> None:
    """A line the user must see while the item runs: printed here, and by the controller's live display
    (under -n, where a worker's output is not shown)."""
    settings.log(f"{item}: {line}")
    try:
        live.update(notice=line)
        if settings.announce is not None:
            settings.announce(f"[fmlbench] {item}: {line}")
    except Exception as exc:  # a line shown to the user is no reason to lose the run's final test
        settings.log(f"{item}: the line above could not be shown: {exc!r}")


def _final_test(task: Task, session: HarnessSession, store: RunStore, record: RunRecord, env: dict[str, str], manifest,
                sandboxed: bool, pool: warm.WarmPool | None, cache: DataCache | None = None) -> None:
    """Fresh workspace, best-val code restored, validation re-run, test run once (the original's protocol).

    The validation re-run only regenerates what the test needs: when it fails, the test is run all the
    same and the failure is kept in ``final_val_error``. With no successful step the baseline code is
    tested; the scorer then credits the declared baseline values, as the original does. Where the agent
    had the baseline run outside its budget (``run_baseline``, OpenEvolve's port), its measured value is a
    candidate too, the earliest: the baseline code is tested unless a step beat that value strictly, as
    the port's population keeps its seed as the best program until a child is fitter.
    """
    # the code the run started from, kept beside the steps' snapshots for the exploration metrics
    record.baseline_snapshot = store.write_named_snapshot("baseline", session.baseline_files)
    best = session.best
    measured = record.baseline_run
    if measured is not None and measured.success and measured.metric is not None and (
            best is None or not session.journal.better(best.metric, measured.metric)):
        best = None
    if best is None:
        files = session.baseline_files
        record.test_on_baseline = True
    else:
        files = store.read_snapshot(best.snapshot)
    final = Workspace.create(task, store.dir / "final", env, store.logs, sandboxed, pool, data=cache)
    final_manifest = manifest.with_workspace(final.path)
    problems = final_manifest.verify()
    if problems:
        raise IntegrityViolation(problems, "in the fresh test workspace")
    restored = final.editor.set_files(files)
    if not restored.applied:
        record.test_error = f"could not restore the best code: {restored.error}"
        return
    val = final.run_split("val", "final", manifest=final_manifest)
    record.final_val = val.metric
    if val.metric is None:
        record.final_val_error = f"validation re-run of the best code failed: {val.error[-500:]}"
    test = final.run_split("test", "final", manifest=final_manifest)
    record.final_test_s = val.duration_s + test.duration_s
    record.final_test_cpu_s = val.cpu_s + test.cpu_s if val.cpu_s is not None and test.cpu_s is not None else None
    if not test.success:
        record.test_error = f"test run failed: {test.error[-500:]}"
        return
    record.test_metric = test.metric
    record.test_metrics = test.metrics
    record.test_constraints = test.constraints
    record.constraint_violated = test.constraint_violated
