"""What the warm-interpreter tests share (tests/test_warm*.py): a toy task with a runner of the test's
own, a run's warm pool, one sandboxed experiment or a search's steps, warm or cold, and looks at /proc."""

import json
import shutil
from pathlib import Path

from conftest import DATA

from pytest_fmlbench.executor import scrubbed_env
from pytest_fmlbench.isolation import warm
from pytest_fmlbench.spec import load_task
from pytest_fmlbench.workspace import Workspace


def task_with_runner(tmp_path: Path, runner: str) -> Path:
    task = tmp_path / "toy_task"
    shutil.copytree(DATA / "toy_task", task)
    (task / "workspace" / "train.py").write_text(runner)
    return task


def warm_pool(task, root: Path, logs: Path, lines: list[str] | None = None) -> warm.WarmPool:
    return warm.pool_for(task, logs, (lines if lines is not None else []).append, True,
                         hidden=[task.root, root], gpus=False)


def run_experiment(task_dir: Path, root: Path, use_warm: bool, lines: list[str] | None = None):
    """(result, log text) of one sandboxed val run of ``task_dir``'s runner, warm or cold."""
    task = load_task(task_dir / "task.yaml")
    logs = root / "logs"
    pool = warm_pool(task, root, logs, lines) if use_warm else None
    try:
        ws = Workspace.create(task, root / "search", scrubbed_env({}), logs, True, pool)
        out = ws.out_dir("val")
        shutil.rmtree(out)
        out.mkdir(parents=True)
        result = ws.experiment("val", out, "probe")
    finally:
        if pool is not None:
            pool.close()
    return result, (logs / "probe.log").read_text()


def probe_of(log: str) -> dict:
    [line] = [line for line in log.splitlines() if line.startswith("PROBE ")]
    return json.loads(line[len("PROBE "):])


def is_running(pid: int) -> bool:
    """Whether ``pid`` is a process that has not ended (a zombie has: only its parent's wait is left)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def children_of(pid: int) -> list[int]:
    return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def run_steps(task_dir: Path, root: Path, count: int, between=None, lines: list[str] | None = None):
    """``count`` sandboxed val runs of ``task_dir``'s runner in one workspace and one pool, as a search
    runs them (``out`` emptied in place); ``between(ws, step)`` runs before each step but the first.
    Their (result, log text), and the pool's counts of steps built ahead that were used and discarded."""
    from pytest_fmlbench.workspace import _emptied

    task = load_task(task_dir / "task.yaml")
    logs = root / "logs"
    pool = warm_pool(task, root, logs, lines)
    done = []
    try:
        ws = Workspace.create(task, root / "search", scrubbed_env({}), logs, True, pool)
        for step in range(count):
            if step and between is not None:
                between(ws, step)
            out = ws.out_dir("val")
            _emptied(out)
            result = ws.experiment("val", out, f"step{step}")
            done.append((result, (logs / f"step{step}.log").read_text()))
    finally:
        pool.close()
    return done, pool.ahead_used, pool.ahead_discarded
