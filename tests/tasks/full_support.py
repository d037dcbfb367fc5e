"""What every full-profile task's tests share: its spec against the original's, a smoke-scale project."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from pytest_fmlbench.scoring.original import builtin_tasks
from pytest_fmlbench.spec import TaskSpec

from conftest import REPO

# the original's FML-bench-Lite subset (its README), by original task name
LITE = {"Continual_Learning_pycil", "Data_Efficiency_usb", "Generalization_domainbed",
        "Generalization_domainbed_officehome", "Robustness_openood", "Privacy_opacus", "Privacy_privacymeter",
        "Robustness_and_Reliability_art"}


def assert_matches_original(spec: TaskSpec) -> None:
    """Metric, direction, bounds, Lite membership and (as a reference) baseline values of the original task."""
    assert spec.profile == "full" and spec.original is not None
    facts = builtin_tasks()[spec.original.task]
    assert spec.metric.key == facts.metric
    assert spec.metric.direction == facts.direction and spec.metric.transform == facts.transform
    assert spec.original.dataset == facts.dataset
    assert (spec.normalization.best, spec.normalization.worst) == (facts.best, facts.worst)
    assert ("lite" in spec.markers) == (spec.original.task in LITE)
    assert spec.id == spec.original.task.lower() + "_full"
    if spec.baseline.source == "paper":
        assert (spec.baseline.val, spec.baseline.test) == (facts.baseline_val, facts.baseline_test)
        assert "not yet reproduced" in spec.baseline.note
    else:
        assert spec.baseline.hardware
    assert spec.resources.gpus >= 1 and spec.resources.gpu_memory_gb and spec.expected_duration_s
    for artifact in spec.data:
        assert artifact.fixture, f"{artifact.name} has no smoke-scale fixture"


def fmlbench(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    script = Path(sys.executable).with_name("fmlbench")
    return subprocess.run([str(script), *args], capture_output=True, text=True, timeout=600, env=env)


def smoke_project(pytester, small_id: str, data_root: Path) -> Path:
    """A project holding ``small_id``'s folder (its full task inside) and smoke fixtures in ``data_root``."""
    shutil.copytree(REPO / "task_suites" / small_id, pytester.path / "task_suites" / small_id,
                    ignore=shutil.ignore_patterns("__pycache__"))
    done = fmlbench("data", "fixtures", "-k", f"{small_id}_full", "--suite", str(pytester.path / "task_suites"),
                    "--root", str(data_root))
    assert done.returncode == 0, done.stdout + done.stderr
    return pytester.path / "task_suites" / small_id / "full"


def load_full_record(project: Path, task_id: str) -> dict:
    records = sorted((project / "reports" / "fmlbench" / "runs" / task_id).glob("*/record.json"))
    assert len(records) == 1, records
    return json.loads(records[0].read_text())
