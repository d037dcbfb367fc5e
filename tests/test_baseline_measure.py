"""`fmlbench baseline --measure`: a full task's unchanged baseline run here, its values, hardware and day written
beside task.yaml and read back as the task's baseline (source: measured, the declared values beside); a smoke
run is refused; an unmeasured baseline declares no values, and a measured file that does not parse is one line."""

import shutil
import subprocess
import sys
from datetime import datetime, timezone

import pytest
import yaml

from pytest_fmlbench.cli import main
from pytest_fmlbench.scoring.groups import UNMEASURED_NOTE
from pytest_fmlbench.spec import MEASURED_BASELINE_FILE, TaskSpecError, load_task

from conftest import DATA, junit_props

PAPER = {"val": 0.5, "test": 0.5, "source": "paper", "note": "a made-up paper value, not yet reproduced here"}


def toy_full_task(suite, baseline=PAPER):
    """tests/data/toy_task with a full-profile twin of itself (CPU only, no data): the cheapest full task."""
    small = suite / "toy_task"
    shutil.copytree(DATA / "toy_task", small, ignore=shutil.ignore_patterns("__pycache__"))
    full = small / "full"
    shutil.copytree(small / "workspace", full / "workspace")
    shutil.copytree(small / "harness", full / "harness")
    spec = yaml.safe_load((small / "task.yaml").read_text())
    spec.update(id="toy_task_full", profile="full", baseline=baseline, expected_duration_s=10,
                resources={"gpus": 0}, original={"task": "Toy", "dataset": "toy"})
    spec.pop("knobs")
    (full / "task.yaml").write_text(yaml.safe_dump(spec))
    return full


def test_a_smoke_measurement_is_refused(capsys):
    assert main(["baseline", "--measure", "-k", "fairness_fairlearn_full", "--scale=smoke"]) == 2
    assert "--scale=smoke is refused" in capsys.readouterr().err


def test_the_measured_values_hardware_and_day_become_the_tasks_baseline(tmp_path):
    full = toy_full_task(tmp_path / "task_suites")
    assert load_task(full / "task.yaml").spec.baseline.source == "paper"
    done = subprocess.run([sys.executable, "-m", "pytest_fmlbench.cli", "baseline", "--measure", "-k", "toy_task_full",
                           "--suite", str(tmp_path / "task_suites"), "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    written = yaml.safe_load((full / MEASURED_BASELINE_FILE).read_text())
    # the toy's own baseline values (tests/data/toy_task/task.yaml), which its code reproduces exactly
    assert (written["val"], written["test"]) == (0.76, 0.72)
    assert written["measured_on"] == datetime.now(timezone.utc).date() and "cores" in written["hardware"]
    assert "toy_task_full: measured val 0.76, test 0.72" in done.stdout and "paper before: val 0.5" in done.stdout
    baseline = load_task(full / "task.yaml").spec.baseline
    assert (baseline.source, baseline.val, baseline.test) == ("measured", 0.76, 0.72)
    assert baseline.hardware == written["hardware"] and baseline.measured_on == written["measured_on"]
    assert (baseline.paper.val, baseline.paper.test) == (0.5, 0.5)  # the declared values, kept beside


def test_an_unmeasured_baseline_declares_no_values_and_a_measurement_fills_it(tmp_path):
    unmeasured = {"source": "unmeasured", "note": "no GPU has run it"}
    full = toy_full_task(tmp_path / "task_suites", unmeasured)
    spec = load_task(full / "task.yaml").spec
    assert (spec.baseline.val, spec.baseline.test, spec.baseline.measured) == (None, None, False)
    (full / MEASURED_BASELINE_FILE).write_text(yaml.safe_dump(
        {"val": 0.7, "test": 0.6, "hardware": "1 x H100", "measured_on": "2026-12-07", "steps": 1}))
    baseline = load_task(full / "task.yaml").spec.baseline
    assert (baseline.source, baseline.val, baseline.paper) == ("measured", 0.7, None) and baseline.measured
    (full / MEASURED_BASELINE_FILE).write_text("val: 0.7\n")
    with pytest.raises(TaskSpecError, match=rf"{MEASURED_BASELINE_FILE}: field 'test': Field required"):
        load_task(full / "task.yaml")


@pytest.mark.parametrize("baseline, problem", [
    ({"source": "unmeasured", "val": 0.5, "test": 0.5, "note": "n"}, "an unmeasured baseline declares no val or test"),
    ({"source": "unmeasured"}, "unmeasured values need a note"),
    ({"source": "paper", "note": "n"}, "a paper baseline needs val and test"),
])
def test_a_baseline_source_and_its_values_agree(tmp_path, baseline, problem):
    full = toy_full_task(tmp_path / "task_suites", baseline)
    with pytest.raises(TaskSpecError, match=problem):
        load_task(full / "task.yaml")


def test_a_run_against_an_unmeasured_baseline_says_so_in_its_junit_properties(pytester, bench):
    """No number stands in for the missing baseline: the properties say unmeasured, NI is empty with the note."""
    toy_full_task(pytester.path / "task_suites", {"source": "unmeasured", "note": "no GPU has run it"})
    result = bench("--agent=baseline", "--steps=1", "-m", "full", "--junitxml=out.xml", "task_suites")
    result.assert_outcomes(passed=1)
    props = junit_props(pytester.path / "out.xml", "toy_task_full[seed0]")
    assert props["baseline_val"] == props["baseline_test"] == "unmeasured"
    assert props["normalized_improvement"] == "" and props["note"] == UNMEASURED_NOTE
    assert float(props["test_metric"]) == 0.72  # the raw value stands
