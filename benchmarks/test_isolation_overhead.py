"""On-demand benchmark of the isolation's own cost per step (target: at most 50 ms on 2 cores).

    .venv/bin/python -m pytest benchmarks/test_isolation_overhead.py --benchmark-only

The same trivial command (``/bin/true``, so that nothing but the wrapping is measured) runs plainly
and inside a full step sandbox: the bubblewrap namespaces and binds of a real workspace, the step's
control group with its memory and process limits, and their teardown. The difference is the
isolation's overhead; an experiment's own run time comes on top in both cases.
"""

import os
import shutil
from pathlib import Path

import pytest

from pytest_fmlbench import isolation
from pytest_fmlbench.executor import run_command

TOY = Path(__file__).parent.parent / "tests" / "data" / "toy_task"
TRUE = shutil.which("true") or "/bin/true"

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")


@pytest.fixture
def view(tmp_path):
    workspace, out = tmp_path / "workspace", tmp_path / "out"
    shutil.copytree(TOY / "workspace", workspace)
    out.mkdir()
    return isolation.ExperimentView(workspace, out, [workspace / "train.py", workspace / "data"], [TOY])


def test_plain_command(benchmark, view, tmp_path):
    result = benchmark(run_command, [TRUE], cwd=view.workspace, env=dict(os.environ), timeout_s=30,
                       log_path=tmp_path / "plain.log")
    assert result.ok


def test_sandboxed_command(benchmark, view, tmp_path):
    isolation.check_available()

    def step():
        group = isolation.step_limits(512, 256, gpus=False)
        return run_command(isolation.bwrap_argv(view, [TRUE]), cwd=view.workspace,
                           env=isolation.sandbox_env(dict(os.environ)), timeout_s=30,
                           log_path=tmp_path / "sandboxed.log", group=group)

    assert benchmark(step).ok
