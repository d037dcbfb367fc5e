"""The shipped tasks: valid specs, collection as documented, and baselines that reproduce task.yaml."""

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from pytest_fmlbench.spec import load_task

from conftest import REPO, junit_props

TASKS = sorted(p.parent.name for p in (REPO / "task_suites").glob("*/task.yaml"))
# tasks whose own test file (tests/tasks/test_<id>.py) already reproduces the baseline, with an attack
OWN_TESTS = {p.stem.removeprefix("test_") for p in (REPO / "tests" / "tasks").glob("test_*.py")}
SHARED_BASELINE_CHECK = [t for t in TASKS if t not in OWN_TESTS]


def test_the_small_tasks_are_present():
    assert {"privacy_opacus", "causality_gcastle", "fairness_fairlearn"} <= set(TASKS)


@pytest.mark.parametrize("task_id", TASKS)
def test_spec_is_valid(task_id):
    task = load_task(REPO / "task_suites" / task_id / "task.yaml")
    assert task.spec.knobs is not None and task.spec.profile == "small"
    assert "split_config.json" in task.spec.editable


def test_readme_collection_command(pytester, bench):
    shutil.copytree(REPO / "task_suites", pytester.path / "task_suites")
    result = bench("--collect-only", "-q", "--agent=baseline", "--seeds=3", "task_suites")
    result.stdout.fnmatch_lines([f"*{len(TASKS) * 3} tests collected*"])
    result = bench("--collect-only", "-q", "--agent=baseline", "-k", "privacy_opacus", "task_suites")
    result.stdout.fnmatch_lines(["task_suites/privacy_opacus::privacy_opacus[[]seed0]", "*1/* tests collected (* deselected)*"])


@pytest.mark.parametrize("start", ["warm", "cold"])
def test_baselines_reproduce_task_yaml_under_xdist(pytester, bench, start):
    """Each baseline runs for real (the field's library, offline data) and reproduces its declared values.

    The declared baselines are what these runs produce, at full precision: the three tasks are
    deterministic on CPU (fixed seeds; opacus and gcastle pin their math to one thread; fairlearn's
    metric is a ratio of counts), so the unchanged baseline must score NI exactly 0 on every task,
    whether its commands fork from warm interpreters or start cold (--cold-start).
    """
    for task_id in SHARED_BASELINE_CHECK:
        shutil.copytree(REPO / "task_suites" / task_id, pytester.path / "task_suites" / task_id)
    extra = ["--cold-start"] if start == "cold" else []
    result = bench("--agent=baseline", "--steps=1", "-n", "2", "--junitxml=out.xml", *extra, "task_suites")
    result.assert_outcomes(passed=len(SHARED_BASELINE_CHECK))
    seen = set()
    for case in ET.parse(pytester.path / "out.xml").getroot().iter("testcase"):
        props = junit_props(pytester.path / "out.xml", case.get("name"))
        task = props["task"]
        spec = load_task(REPO / "task_suites" / task / "task.yaml").spec
        record = json.loads((Path(props["fmlbench_run_dir"]) / "record.json").read_text())
        assert props["integrity"] == "ok", task
        assert record["best_val"] == pytest.approx(spec.baseline.val, rel=0, abs=1e-9), task
        assert record["test_metric"] == pytest.approx(spec.baseline.test, rel=0, abs=1e-9), task
        assert float(props["normalized_improvement"]) == 0.0, task
        logs = Path(props["fmlbench_run_dir"]) / "logs"
        heads = {p.name: p.read_text().splitlines()[0] for p in logs.glob("*_val*.log")}
        why_cold = (logs / "warm_start.log").read_text() if (logs / "warm_start.log").exists() else ""
        if start == "cold":
            assert not any(head.startswith("[warm]") for head in heads.values()) and not why_cold, (task, heads)
        else:
            # every command forked warm, or the run's log says in one line why its kind started cold
            for name, head in heads.items():
                kind = "harness" if name.endswith("_evaluate.log") else "experiment"
                assert head.startswith("[warm]") or f"warm start off for {kind} commands" in why_cold, (task, name)
        seen.add(task)
    assert seen == set(SHARED_BASELINE_CHECK)
