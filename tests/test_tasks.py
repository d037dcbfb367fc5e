"""The shipped tasks: valid specs, collection as documented, and baselines that reproduce task.yaml."""

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from pytest_fmlbench.scoring.original import builtin_tasks
from pytest_fmlbench.spec import load_task

from conftest import REPO, junit_props

TASKS = sorted(p.parent.name for p in (REPO / "task_suites").glob("*/task.yaml"))
# the full profile: task_suites/<id>/full/, id <id>_full
FULL_TASKS = sorted(f"{p.parent.parent.name}_full" for p in (REPO / "task_suites").glob("*/full/task.yaml"))
FULL_LITE = sorted(t for t in FULL_TASKS if "lite" in load_task(REPO / "task_suites" / t.removesuffix("_full") / "full"
                                                                  / "task.yaml").spec.markers)
# tasks whose own test file (tests/tasks/test_<id>.py) already reproduces the baseline, with an attack
OWN_TESTS = {p.stem.removeprefix("test_") for p in (REPO / "tests" / "tasks").glob("test_*.py")}
SHARED_BASELINE_CHECK = [t for t in TASKS if t not in OWN_TESTS]
# the cold path (--cold-start) on tasks that stand for the others: torch's (opacus) and pandas and scikit-learn's
# (fairlearn); every task's baseline reproduces warm, here or in its own test file
COLD_CHECK = ["fairness_fairlearn", "privacy_opacus"]


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
    result.stdout.fnmatch_lines([f"*{(len(TASKS) + len(FULL_TASKS)) * 3} tests collected*"])
    result = bench("--collect-only", "-q", "--agent=baseline", "-k", "privacy_opacus and small", "task_suites")
    result.stdout.fnmatch_lines(["task_suites/privacy_opacus::privacy_opacus[[]seed0]", "*1/* tests collected (* deselected)*"])


def test_the_full_profile_is_selected_by_its_marker(pytester, bench):
    """-m full selects the full-profile tasks, -m "full and lite" the original's Lite ones, -m small none of them."""
    shutil.copytree(REPO / "task_suites", pytester.path / "task_suites")
    assert FULL_TASKS and set(FULL_LITE) <= set(FULL_TASKS)
    result = bench("--collect-only", "-q", "--agent=baseline", "-m", "full", "task_suites")
    # items come longest expected duration first, not in name order
    collected = {line for line in result.stdout.lines if "::" in line}
    assert collected == {f"task_suites/{t.removesuffix('_full')}/full::{t}[seed0]" for t in FULL_TASKS}, collected
    result.stdout.fnmatch_lines([f"*{len(FULL_TASKS)}/* tests collected*"])
    result = bench("--collect-only", "-q", "--agent=baseline", "-m", "full and lite", "task_suites")
    result.stdout.fnmatch_lines([f"*{len(FULL_LITE)}/* tests collected*"])
    result = bench("--collect-only", "-q", "--agent=baseline", "-m", "small", "task_suites")
    result.stdout.fnmatch_lines([f"*{len(TASKS)}/* tests collected*"])
    assert "_full" not in result.stdout.str()


@pytest.mark.parametrize("task_id", FULL_TASKS)
def test_full_spec_is_valid(task_id):
    task = load_task(REPO / "task_suites" / task_id.removesuffix("_full") / "full" / "task.yaml")
    assert task.spec.profile == "full"
    # the original's target files, by name: a file inside the original's checkout of a library that is not
    # fetched here (ART's trainer) is a workspace file of the same name; DomainBed's are the checkout's own
    assert sorted(Path(f).name for f in task.spec.editable) == sorted(
        Path(f).name for f in builtin_tasks()[task.spec.original.task].target_files)


@pytest.mark.parametrize("start, tasks", [("warm", SHARED_BASELINE_CHECK), ("cold", COLD_CHECK)], ids=["warm", "cold"])
def test_baselines_reproduce_task_yaml_under_xdist(pytester, bench, start, tasks):
    """Each baseline runs for real (the field's library, offline data) and reproduces its declared values.

    The declared baselines are what these runs produce, at full precision: the three tasks are
    deterministic on CPU (fixed seeds; opacus and gcastle pin their math to one thread; fairlearn's
    metric is a ratio of counts), so the unchanged baseline must score NI exactly 0 on every task,
    whether its commands fork from warm interpreters or start cold (--cold-start).
    """
    for task_id in tasks:
        shutil.copytree(REPO / "task_suites" / task_id, pytester.path / "task_suites" / task_id)
    extra = ["--cold-start"] if start == "cold" else []
    result = bench("--agent=baseline", "--steps=1", "-n", "2", "--junitxml=out.xml", *extra, "task_suites")
    result.assert_outcomes(passed=len(tasks))
    seen = set()
    for case in ET.parse(pytester.path / "out.xml").getroot().iter("testcase"):
        props = junit_props(pytester.path / "out.xml", case.get("name"))
        task = props["task"]
        spec = load_task(REPO / "task_suites" / task / "task.yaml").spec
        record = json.loads((Path(props["fmlbench_run_dir"]) / "record.json").read_text())
        assert props["integrity"] == "ok", task
        # these three reproduce exactly on every CPU variant measured (docs/task-format.md)
        assert spec.baseline.tolerance is None, task
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
    assert seen == set(tasks)
