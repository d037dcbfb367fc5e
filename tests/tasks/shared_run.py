"""One benchmark run of a task that several tests of its module read.

A task's checks of one run (its scores are the declared ones; agent code in it reached nothing hidden) need
the same one-step run of the task, which trains for real: it is the most expensive thing in the suite. A
module-scoped fixture runs it once in a project folder of its own (``built_once``) and each test asserts its
own property on what the run left. `make test`'s ``--dist loadgroup`` keeps a module's tests on one worker
(tests/conftest.py); under any other distribution (``worksteal`` steals tests) a second worker that asks waits
for the run the first one builds (a lock in the session's folder, which its workers share) instead of training
the same run a second time beside it.

``run_child`` runs the plugin in a child pytest as the ``bench`` fixture does (pytester's
``runpytest_subprocess``), for fixtures wider than one test, which pytester's function scope cannot serve.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from filelock import FileLock

from conftest import child_args, child_pytest


def built_once(tmp_path_factory: pytest.TempPathFactory, key: str, build):
    """``build(folder)``'s value, built once in the whole session by whichever xdist worker asks first, in a
    folder of the session's own; a worker that asks meanwhile waits for it, and every later ask reads it
    (pickled beside the folder). A build that failed fails every other test that asks, with its error line;
    the test that built it shows the whole failure."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # a worker's basetemp is <the session's>/popen-gwN
    shared = root / "built-once"
    shared.mkdir(exist_ok=True)
    saved = shared / f"{key}.pickle"
    with FileLock(str(shared / f"{key}.lock")):
        if not saved.exists():
            folder = shared / key
            folder.mkdir()
            try:
                value = build(folder)
            except BaseException as exc:  # a skip or a failure: the others are told, not left to build again
                outcome = "skipped" if isinstance(exc, pytest.skip.Exception) else "failed"
                saved.write_bytes(pickle.dumps((outcome, f"{type(exc).__name__}: {exc}".splitlines()[0])))
                raise
            saved.write_bytes(pickle.dumps(("built", value)))
            return value
        outcome, value = pickle.loads(saved.read_bytes())
    if outcome == "skipped":
        pytest.skip(value)
    if outcome == "failed":
        pytest.fail(f"the shared run {key} failed in the test that built it: {value}", pytrace=False)
    return value


def run_child(project: Path, *args: str, env: dict[str, str] | None = None) -> pytest.RunResult:
    """The plugin in a child pytest run in ``project`` with ``env`` added to this process's environment, as
    pytester runs one: its own basetemp, stdin closed, no outer PYTEST_ADDOPTS, HOME in the project. Its
    output is printed, so a failing test shows it."""
    child_env = {key: value for key, value in os.environ.items() if key not in ("PYTEST_ADDOPTS", "TOX_ENV_DIR")}
    child_env.update(HOME=str(project), USERPROFILE=str(project), **(env or {}))
    basetemp = tempfile.mkdtemp(prefix="runpytest-", dir=project)
    started = time.monotonic()
    done = subprocess.run([*child_pytest(), f"--basetemp={basetemp}", *child_args(*args)], cwd=project,
                          env=child_env, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    print(done.stdout)
    print(done.stderr, file=sys.stderr)
    return pytest.RunResult(done.returncode, done.stdout.splitlines(), done.stderr.splitlines(),
                            time.monotonic() - started)
