"""An isolated copy of a task's baseline, and the prepare -> experiment -> evaluate pipeline on it."""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from .editor import Editor
from .evalkit import ConstraintOutcome, EvalResult
from .executor import CommandResult, format_command, run_command
from . import sandbox
from .integrity import Manifest, protected_files, sha256_file
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

    @property
    def constraint_violated(self) -> bool:
        return any(not c.ok for c in self.constraints)


class Workspace:
    """``<dir>/workspace`` (the agent's copy), ``<dir>/private`` (harness only), ``<dir>/out`` (artefacts)."""

    def __init__(self, task: Task, root: Path, env: dict[str, str], logs: Path, sandboxed: bool = False):
        self.task = task
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
    def create(cls, task: Task, root: Path, env: dict[str, str], logs: Path, sandboxed: bool = False) -> Workspace:
        """A fresh copy of the baseline with its visible data prepared."""
        if root.exists():
            shutil.rmtree(root)
        root.mkdir(parents=True)
        shutil.copytree(task.workspace_dir, root / "workspace", symlinks=True,
                        ignore=shutil.ignore_patterns("__pycache__"))
        (root / "private").mkdir()
        (root / "verdicts").mkdir()
        ws = cls(task, root, env, logs, sandboxed)
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
        }

    def _harness(self, command: str, split: str, out: Path, log_name: str, result: Path | None = None) -> CommandResult:
        template = getattr(self.task.spec.commands, command)
        argv = format_command(template, self._values(split, out, result))
        out.mkdir(parents=True, exist_ok=True)
        return run_command(argv, cwd=self.path, env=self.env, timeout_s=self.task.spec.timeout_s,
                           log_path=self.logs / f"{log_name}.log")

    def run_split(self, split: str, log_prefix: str, manifest: Manifest | None = None) -> SplitOutcome:
        """Run the experiment on ``split`` and have the pristine evaluator judge it.

        ``manifest`` is verified before the evaluator runs, so the verdict never comes from tampered code.
        """
        spec = self.task.spec
        out = self.out_dir(split)
        if out.exists():
            shutil.rmtree(out)
        out.mkdir(parents=True)
        if split == "test":
            prep = self._harness("prepare", "test", out, f"{log_prefix}_prepare_test")
            if not prep.ok:
                raise HarnessError(prep.describe_failure(f"{self.task.id}: prepare (test)", spec.timeout_s))
            self._seal_private()
        template = spec.commands.val if split == "val" else spec.commands.test
        argv = format_command(template, self._values(split, out))
        if self.sandboxed:
            argv = sandbox.wrap(argv, read_only=[self.task.root, *protected_files(self.path, spec.protected)],
                                hidden=[self.task.harness_dir, self.private, self.root / "verdicts"])
        run = run_command(argv, cwd=self.path, env=self.env, timeout_s=spec.timeout_s,
                          log_path=self.logs / f"{log_prefix}_{split}.log")
        if manifest is not None:
            problems = manifest.verify() + self._check_private()
            if problems:
                raise IntegrityViolation(problems, f"after the {split} run")
        if not run.ok:
            return SplitOutcome(split, False, error=run.describe_failure(f"{split} run", spec.timeout_s),
                                duration_s=run.duration_s)
        # the verdict lives outside anything the experiment could write
        verdict_path = self.root / "verdicts" / f"{split}.json"
        verdict_path.unlink(missing_ok=True)
        judged = self._harness("evaluate", split, out, f"{log_prefix}_{split}_evaluate", result=verdict_path)
        duration = run.duration_s + judged.duration_s
        if not judged.ok:
            return SplitOutcome(split, False, error=judged.describe_failure("evaluation", spec.timeout_s),
                                duration_s=duration)
        try:
            verdict = EvalResult.model_validate_json(verdict_path.read_text())
            metric = verdict.primary(spec.metric.key)
        except (OSError, ValidationError, KeyError, ValueError) as exc:
            raise HarnessError(f"{self.task.id}: evaluator wrote an unusable verdict: {exc}") from None
        metrics = {f"{name}/{key}": value for name, d in verdict.datasets.items() for key, value in d.means.items()}
        outcome = SplitOutcome(split, True, metric, metrics, verdict.constraints, duration_s=duration)
        broken = verdict.violated()
        if broken and split == "val":
            # a constraint broken on val fails the step (the original's rule)
            outcome.success = False
            outcome.error = "constraint violated: " + "; ".join(
                f"{c.name} ({c.detail or f'value {c.value} vs limit {c.limit}'})" for c in broken
            )
        return outcome
