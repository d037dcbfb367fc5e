"""An isolated copy of a task's baseline, and the prepare -> experiment -> evaluate pipeline on it."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from pydantic import ValidationError

from .editor import Editor
from .evalkit import ConstraintOutcome, EvalResult
from .executor import CommandResult, format_command, run_command
from . import isolation
from .integrity import Manifest, sha256_file
from .isolation import artifacts, gpu_check, selfcheck
from .datacache import DataCache
from .isolation.warm import HOLDER, WarmPool
from .spec import Task


class HarnessError(RuntimeError):
    """The task's own (protected) harness failed: not the agent's fault, the item errors."""


class IntegrityViolation(RuntimeError):
    def __init__(self, problems: list[str], when: str):
        self.problems = problems
        super().__init__(f"integrity violated {when}: " + "; ".join(problems))


@dataclass
class SplitOutcome:
    """What one experiment on a split produced, as the harness judged it."""

    split: str
    success: bool
    metric: float | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    constraints: list[ConstraintOutcome] = field(default_factory=list)
    error: str = ""
    duration_s: float = 0.0
    # the CPU time of its experiment and evaluation (executor.CommandResult.cpu_s); None where one of them
    # was not counted
    cpu_s: float | None = None
    # what the sandbox refused the experiment, as its own output reported it (EROFS, EPERM, ...)
    blocked: list[str] = field(default_factory=list)
    # a failed experiment's error as the port's executor reports it to agents: its standard error
    # (head and tail kept), or "Timeout after N seconds"; None when the experiment itself succeeded
    stderr: str | None = None

    @property
    def constraint_violated(self) -> bool:
        return any(not c.ok for c in self.constraints)


# harness commands: no user site, no PYTHON* variables (PYTHONPATH could shadow their imports), no
# bytecode written next to the pristine harness
HARNESS_PYTHON = [sys.executable, "-s", "-E", "-B"]
# what a refused attempt looks like in an experiment's output
_BLOCKED = re.compile(
    r"^.*(Read-only file system|Permission denied|Operation not permitted|Network is unreachable|"
    r"Resource temporarily unavailable|Cannot assign requested address).*$", re.MULTILINE)


class Workspace:
    """``<dir>/workspace`` (the agent's copy), ``<dir>/private`` (harness only), ``<dir>/out`` (artefacts)."""

    def __init__(self, task: Task, root: Path, env: dict[str, str], logs: Path, sandboxed: bool = True,
                 warm: WarmPool | None = None, data: DataCache | None = None):
        self.task = task
        # the run's warm parents (isolation.warm); None: every command starts a fresh interpreter
        self.warm = warm
        # a full-profile task's data cache: its folder is the harness's {data}, never shown to an experiment
        self.data = data
        self.sandboxed = sandboxed
        self.root = root
        self.path = root / "workspace"
        self.private = root / "private"
        self.env = env
        self.logs = logs
        self.editor = Editor(self.path, task.spec.editable)
        # the private folder sits beside the workspace, so the experiment could reach it: what the
        # harness put there is hashed after each prepare and checked before each evaluation
        self._private_hashes: dict[str, str] = {}

    @classmethod
    def create(cls, task: Task, root: Path, env: dict[str, str], logs: Path, sandboxed: bool = True,
               warm: WarmPool | None = None, data: DataCache | None = None) -> Workspace:
        """A fresh copy of the baseline with its visible data prepared."""
        if root.exists():
            shutil.rmtree(root)
        root.mkdir(parents=True)
        shutil.copytree(task.workspace_dir, root / "workspace", symlinks=True,
                        ignore=shutil.ignore_patterns("__pycache__"))
        copy_upstream(task, data, root / "workspace")
        copy_from_kit(task, root / "workspace")
        (root / "private").mkdir()
        (root / "verdicts").mkdir()
        (root / "evidence").mkdir()
        ws = cls(task, root, env, logs, sandboxed, warm, data)
        if warm is not None:
            # the experiments' parent imports while prepare runs
            warm.parent("experiment", (), ws._experiment_env(), sandboxed)
        result = ws._harness("prepare", "val", ws.out_dir("val"), log_name=f"{root.name}_prepare_val")
        if not result.ok:
            raise HarnessError(result.describe_failure(f"{task.id}: prepare (val)", task.spec.timeout_s))
        ws._seal_private()
        return ws

    def _private_state(self) -> dict[str, str]:
        return {p.relative_to(self.private).as_posix(): sha256_file(p)
                for p in sorted(self.private.rglob("*")) if p.is_file() or p.is_symlink()}

    def _seal_private(self) -> None:
        self._private_hashes = self._private_state()

    def _check_private(self) -> list[str]:
        now_state = self._private_state()
        problems = [f"harness-private file {name} was modified or removed"
                    for name, digest in self._private_hashes.items() if now_state.get(name) != digest]
        problems += [f"harness-private file {name} was added by the experiment"
                     for name in now_state if name not in self._private_hashes]
        return problems

    def out_dir(self, split: str) -> Path:
        return self.root / "out" / split

    def take_manifest(self) -> Manifest:
        return Manifest.take(self.path, self.task.spec.protected, self.task.harness_dir, self.task.spec.editable)

    def _values(self, split: str, out: Path, result: Path | None = None) -> dict[str, str | Path]:
        return {
            "workspace": self.path, "harness": self.task.harness_dir, "split": split, "out": out,
            "private": self.private, "result": result or out / "result.json",
            "scale": self.data.scale if self.data else "full", "data": self.data.base if self.data else "",
        }

    def _harness(self, command: str, split: str, out: Path, log_name: str, result: Path | None = None,
                 meanwhile: Callable[[], None] | None = None) -> CommandResult:
        """A harness command: pristine code, isolated imports, run from the harness folder."""
        template = getattr(self.task.spec.commands, command)
        argv = format_command(template, self._values(split, out, result), python=HARNESS_PYTHON)
        out.mkdir(parents=True, exist_ok=True)
        launcher = None
        if self.warm is not None:
            launcher = self.warm.launcher("harness", argv, tuple(HARNESS_PYTHON[1:]), self.task.harness_dir, self.env)
        return run_command(argv, cwd=self.task.harness_dir, env=self.env, timeout_s=self.task.spec.timeout_s,
                           log_path=self.logs / f"{log_name}.log", launcher=launcher, meanwhile=meanwhile)

    def _protected_paths(self) -> list[Path]:
        return protected_paths(self.path, self.task.spec.protected)

    def _view(self, out: Path) -> isolation.ExperimentView:
        return isolation.ExperimentView(
            workspace=self.path, out=out, read_only=self._protected_paths(),
            hidden=[self.task.root, self.root.parent, *self._data_hidden()], gpus=self._gpus(), hide_data=tuple(self.task.spec.sandbox.hide),
        )

    def _data_hidden(self) -> list[Path]:
        return [self.data.root] if self.data else []

    def _gpus(self) -> tuple[str, ...]:
        return tuple(d for d in self.env.get("CUDA_VISIBLE_DEVICES", "").split(",") if d)

    def check_sandbox_view(self) -> None:
        """Before the first step: the sandbox shows the interpreter, this package, the workspace and ``{out}``.

        A task that declares GPUs must see them there, with torch (``isolation.gpu_check``); with
        --no-sandbox it must see them all the same. Raises isolation.SandboxUnavailable (GpuUnavailable for
        the GPUs) with one line naming what is missing and what to do.
        """
        # a task that declares GPUs also has them checked, by torch, in the same sandbox start (gpu_check)
        gpus = self._gpus() if gpu_check.required(self.task.spec.resources.gpus, self.data and self.data.scale) else None
        if gpus == ():
            raise gpu_check.GpuUnavailable(gpu_check.none_assigned(self.task.spec.resources.gpus))
        log = self.logs / f"{self.root.name}_sandbox_check.log"
        if not self.sandboxed:
            if gpus:
                run_command(gpu_check.probe_argv([]), cwd=self.path, env=self.env, timeout_s=self.task.spec.timeout_s,
                            log_path=log)
                self._refuse_unseen_gpus(gpus, log)
            return
        out = self.out_dir("val")
        probe = selfcheck.probe_argv(self.path, out)
        argv = isolation.bwrap_argv(self._view(out), gpu_check.probe_argv(probe) if gpus else probe)
        result = run_command(argv, cwd=self.path, env=isolation.sandbox_env(self.env), timeout_s=self.task.spec.timeout_s,
                             log_path=log)
        found = selfcheck.problem(result.returncode, result.output_tail, self.path, out)
        if found:
            raise isolation.SandboxUnavailable(found)
        if gpus:
            self._refuse_unseen_gpus(gpus, log)

    def _refuse_unseen_gpus(self, gpus: tuple[str, ...], log: Path) -> None:
        found = gpu_check.problem(gpus, log.read_text(errors="replace") if log.is_file() else "")
        if found:
            raise gpu_check.GpuUnavailable(found)

    def experiment(self, split: str, out: Path, log_name: str) -> CommandResult:
        """The agent's code on ``split``: sandboxed unless the user opted out, always under the step's limits."""
        spec = self.task.spec
        template = spec.commands.val if split == "val" else spec.commands.test
        argv = format_command(template, self._values(split, out))
        env = self._experiment_env()
        shown = f"$ {shlex.join(argv)}"
        gpus = self._gpus()
        launcher = None
        if self.sandboxed:
            # the sandbox's arguments, made once (they look at the file system): the same for the cold
            # command and the warm one's holder
            sandbox = isolation.bwrap_argv(self._view(out), [])
            cold = sandbox + argv
            if self.warm is not None:
                launcher = self.warm.launcher("experiment", argv, (), self.path, env,
                                              bwrap=sandbox + HOLDER, cold_bwrap=cold)
            argv = cold
            shown = f"[sandbox: bwrap] {shown}"
        elif self.warm is not None:
            launcher = self.warm.launcher("experiment", argv, (), self.path, env)
        try:
            group = isolation.step_limits(spec.resources.memory_mb, spec.resources.max_processes, bool(gpus),
                                          deferred=self.warm is not None)
        except isolation.limits.LimitsUnavailable:
            if self.sandboxed:
                raise
            group = None  # --no-sandbox on a machine without limits: the run is marked unsandboxed anyway
        return run_command(argv, cwd=self.path, env=env, timeout_s=spec.timeout_s,
                           log_path=self.logs / f"{log_name}.log", group=group, shown=shown, launcher=launcher)

    def _experiment_env(self) -> dict[str, str]:
        return isolation.sandbox_env(self.env) if self.sandboxed else self.env

    def run_split(self, split: str, log_prefix: str, manifest: Manifest | None = None) -> SplitOutcome:
        """Run the experiment on ``split`` and have the pristine evaluator judge it.

        ``manifest`` is verified after the experiment, while the evaluator runs (the harness waits for
        it anyway): a verdict is read only once it found nothing, so none comes from tampered code.
        """
        spec = self.task.spec
        out = self.out_dir(split)
        _emptied(out)
        if split == "test":
            prep = self._harness("prepare", "test", out, f"{log_prefix}_prepare_test")
            if not prep.ok:
                raise HarnessError(prep.describe_failure(f"{self.task.id}: prepare (test)", spec.timeout_s))
            self._seal_private()
        run = self.experiment(split, out, f"{log_prefix}_{split}")
        blocked = blocked_lines(self.logs / f"{log_prefix}_{split}.log") if self.sandboxed else []
        found: list[list[str]] = []  # what the integrity check found, once it ran

        def verify() -> None:
            found.append(manifest.verify() + self._check_private() if manifest is not None else [])

        def refuse_if_tampered() -> None:
            if not found:
                verify()
            if found[0]:
                raise IntegrityViolation(found[0], f"after the {split} run")

        if not run.ok:
            refuse_if_tampered()
            return SplitOutcome(split, False, error=run.describe_failure(f"{split} run", spec.timeout_s),
                                duration_s=run.duration_s, cpu_s=run.cpu_s, blocked=blocked,
                                stderr=_reported_stderr(run, spec.timeout_s))
        # the evaluator reads a copy of {out} made of regular files only, never {out} itself
        evidence = self.root / "evidence" / split
        refused = artifacts.collect(out, evidence)
        # the verdict lives outside anything the experiment could write
        verdict_path = self.root / "verdicts" / f"{split}.json"
        verdict_path.unlink(missing_ok=True)
        judged = self._harness("evaluate", split, evidence, f"{log_prefix}_{split}_evaluate", result=verdict_path,
                               meanwhile=verify)
        refuse_if_tampered()
        duration = run.duration_s + judged.duration_s
        cpu = run.cpu_s + judged.cpu_s if run.cpu_s is not None and judged.cpu_s is not None else None
        if not judged.ok:
            error = judged.describe_failure("evaluation", spec.timeout_s)
            if refused:
                error = "artefacts refused to the evaluator: " + "; ".join(refused) + "\n" + error
            return SplitOutcome(split, False, error=error, duration_s=duration, cpu_s=cpu, blocked=blocked)
        try:
            verdict = EvalResult.model_validate_json(verdict_path.read_text())
            metric = verdict.primary(spec.metric.key)
        except (OSError, ValidationError, KeyError, ValueError) as exc:
            raise HarnessError(f"{self.task.id}: evaluator wrote an unusable verdict: {exc}") from None
        metrics = {f"{name}/{key}": value for name, d in verdict.datasets.items() for key, value in d.means.items()}
        outcome = SplitOutcome(split, True, metric, metrics, verdict.constraints, duration_s=duration, cpu_s=cpu,
                               blocked=blocked)
        broken = verdict.violated()
        if broken and split == "val":
            # a constraint broken on val fails the step (the original's rule)
            outcome.success = False
            outcome.error = "constraint violated: " + "; ".join(
                f"{c.name} ({c.detail or f'value {c.value} vs limit {c.limit}'})" for c in broken
            )
        return outcome


def copy_upstream(task: Task, data: DataCache | None, workspace: Path) -> None:
    """The task's ``upstream`` files, from its verified git checkouts into a fresh workspace.

    Preflight has checked each checkout (its pinned commit, no local changes) before any workspace is
    made; links inside it are copied as links, and the sandbox never follows one out of the workspace.
    """
    if not task.spec.upstream:
        return
    if data is None:
        raise HarnessError(f"{task.id}: its workspace needs files from the data cache, and no cache is set")
    artifacts = {a.name: a for a in task.spec.data}
    for copy in task.spec.upstream:
        checkout = data.path(artifacts[copy.artifact])
        for rel in copy.paths:
            source, target = checkout / rel, workspace / rel
            if source.is_symlink() or not (source.is_file() or source.is_dir()):
                raise HarnessError(f"{task.id}: {copy.artifact} has no file or folder {rel!r} at {checkout}")
            target.parent.mkdir(parents=True, exist_ok=True)
            if source.is_dir():
                shutil.copytree(source, target, symlinks=True, dirs_exist_ok=True,
                                ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
            else:
                shutil.copy2(source, target)


def copy_from_kit(task: Task, workspace: Path) -> None:
    """The task's ``kit`` files: copies of the shared taskkit modules its harness imports, so that the task
    folder holds one source of them. A copy that is editable is the agent's from then on."""
    for rel, source in task.kit_files.items():
        target = workspace / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)


def protected_paths(root: Path, patterns: list[str]) -> list[Path]:
    """The protected globs' matches under ``root``, a folder standing for everything below it: what a
    sandbox binds read-only over a workspace (or over an agent's working copy).

    Next to every protected module, an empty, read-only ``__pycache__``: bytecode planted there
    would run in place of the protected source without changing its hash.
    """
    matches: set[Path] = set()
    for pattern in patterns:
        for path in root.glob(pattern):
            if not path.is_symlink() and (path.is_dir() or path.is_file()):
                matches.add(path)
    for module in [p for p in matches if p.suffix == ".py"]:
        cache = module.parent / "__pycache__"
        if not cache.exists():
            cache.mkdir()
        if cache.is_dir() and not cache.is_symlink():
            matches.add(cache)
    # sorted, a folder comes right before what is below it: each path is kept unless it lies below the
    # last one kept
    kept: list[Path] = []
    for path in sorted(matches):
        if not kept or not str(path).startswith(f"{kept[-1]}/"):
            kept.append(path)
    return kept


def _reported_stderr(run: CommandResult, timeout_s: float) -> str:
    """What the port's executor hands agents as a failed run's error (benchmark/executor.py 212, 277)."""
    if run.timed_out:
        return f"Timeout after {timeout_s:g} seconds"
    if run.limit:
        return f"{run.stderr}\n[{run.limit}: the step's limit was reached; its processes were killed]".lstrip("\n")
    return run.stderr


def blocked_lines(log: Path, keep: int = 10) -> list[str]:
    """Lines of an experiment's output that report an attempt the sandbox refused (first ``keep``)."""
    try:
        with open(log, "rb") as fh:
            text = fh.read(1 << 20).decode(errors="replace")
    except OSError:
        return []
    found = list(dict.fromkeys(m.group(0).strip()[:300] for m in _BLOCKED.finditer(text)))
    return found[:keep]


# ``out`` emptied in place between steps (and made where missing)
_emptied = artifacts.emptied
