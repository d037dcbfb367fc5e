"""One benchmark run of a task that several tests of its module read.

A task's checks of one run (its scores are the declared ones; agent code in it reached nothing hidden) need
the same one-step run of the task, which trains for real: it is the most expensive thing in the suite. A
module-scoped fixture runs it once in a project folder of its own and each test asserts its own property on
what the run left. Under ``-n 2 --dist worksteal`` a module's tests run on one worker unless one is stolen;
then the other worker runs the fixture again, which costs what separate runs cost, never a wrong answer.

``run_child`` runs the plugin in a child pytest as the ``bench`` fixture does (pytester's
``runpytest_subprocess``), for fixtures wider than one test, which pytester's function scope cannot serve.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from conftest import child_args


def run_child(project: Path, *args: str, env: dict[str, str] | None = None) -> pytest.RunResult:
    """The plugin in a child pytest run in ``project`` with ``env`` added to this process's environment, as
    pytester runs one: its own basetemp, stdin closed, no outer PYTEST_ADDOPTS, HOME in the project. Its
    output is printed, so a failing test shows it."""
    child_env = {key: value for key, value in os.environ.items() if key not in ("PYTEST_ADDOPTS", "TOX_ENV_DIR")}
    child_env.update(HOME=str(project), USERPROFILE=str(project), **(env or {}))
    basetemp = tempfile.mkdtemp(prefix="runpytest-", dir=project)
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-mpytest", f"--basetemp={basetemp}", *child_args(*args)], cwd=project,
                          env=child_env, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    print(done.stdout)
    print(done.stderr, file=sys.stderr)
    return pytest.RunResult(done.returncode, done.stdout.splitlines(), done.stderr.splitlines(),
                            time.monotonic() - started)
