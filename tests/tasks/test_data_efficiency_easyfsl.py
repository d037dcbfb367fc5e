"""data_efficiency_easyfsl: the baseline reproduces task.yaml, the episode protocol is one file, and the hidden
test classes, episodes and labels stay out of reach."""

import json
import shutil

import pytest

from pytest_fmlbench.spec import load_task

from conftest import REPO, load_record

TASK = "data_efficiency_easyfsl"
SPEC = load_task(REPO / "task_suites" / TASK / "task.yaml").spec

# Inserted into the editable few_shot.py: at import (val and test runs alike) it looks, wherever the
# experiment could reach, for the hidden test episodes' query labels and for the harness that renders the
# hidden test classes and draws the episodes (its seeds would rebuild them): the harness-private folder
# beside the workspace, every task's harness/ in the project, and any such file anywhere in the project
# tree. It prints what it found as one JSON line; if it finds the query labels, it swaps them in for the
# predictions when the run ends.
ATTACK = r'''
import atexit as _atexit, json as _json, os as _os, sys as _sys
from pathlib import Path as _Path
import numpy as _np

def _loot():
    cwd = _Path.cwd()
    project = next((p for p in cwd.parents if (p / "task_suites").is_dir()), cwd.parent)
    found, scanned = [], 0
    for folder in [cwd.parent / "private", *project.glob("task_suites/*/harness")]:
        if folder.is_dir():
            found += [str(p) for p in folder.rglob("*") if p.is_file()]
    for root, _dirs, files in _os.walk(project):
        scanned += len(files)
        found += [_os.path.join(root, f) for f in files
                  if (f.startswith("test_query_y") and f.endswith(".npy"))
                  or f in ("glyphs.py", "prepare.py", "evaluate.py")]
    found = sorted(set(found))
    print("ATTACK " + _json.dumps({"cwd": str(cwd), "scanned": scanned, "found": found}), flush=True)
    labels = [f for f in found if _os.path.basename(f).startswith("test_query_y")]
    if labels and "--out" in _sys.argv:
        out = _Path(_sys.argv[_sys.argv.index("--out") + 1])
        stolen = _np.load(labels[0])
        _atexit.register(lambda: _np.save(out / "predictions.npy", stolen.astype(_np.int64).ravel()))

_loot()
'''

ATTACK_AGENT = f"""
from pytest_fmlbench import Agent, SearchReplace

class MyAgent(Agent):
    def run(self, session):
        anchor = "import torch.nn as nn\\n"
        edit = session.edit([SearchReplace("few_shot.py", anchor, anchor + {ATTACK!r})])
        assert edit.applied, edit.error
        result = session.run_step("improve", plan="read the hidden test episodes", edit=edit)
        assert result.success, result.error
"""


@pytest.fixture
def project(pytester):
    shutil.copytree(REPO / "task_suites" / TASK, pytester.path / "task_suites" / TASK)
    return pytester.path


def attack_report(log_text: str) -> dict:
    lines = [line for line in log_text.splitlines() if line.startswith("ATTACK ")]
    assert len(lines) == 1, log_text[-2000:]
    return json.loads(lines[0].removeprefix("ATTACK "))


def test_baseline_reproduces_the_declared_values(project, bench):
    result = bench("--agent=baseline", "--steps=1", "task_suites")
    result.assert_outcomes(passed=1)
    record = load_record(project, TASK)
    assert record["integrity"] == "ok"
    assert record["best_val"] == pytest.approx(SPEC.baseline.val, abs=1e-9)
    assert record["test_metric"] == pytest.approx(SPEC.baseline.test, abs=1e-9)


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")
def test_the_hidden_test_episodes_are_out_of_reach(project, bench, write_agent):
    spec = write_agent(ATTACK_AGENT)
    result = bench(f"--agent={spec}", "--steps=1", "task_suites")
    result.assert_outcomes(passed=1)
    record = load_record(project, TASK)
    # the attack changed nothing: same scores as the baseline, nothing tampered with
    assert record["integrity"] == "ok" and record["valid_steps"] == 1
    assert record["best_val"] == pytest.approx(SPEC.baseline.val, abs=1e-9)
    assert record["test_metric"] == pytest.approx(SPEC.baseline.test, abs=1e-9)
    logs = next(project.glob(f"reports/fmlbench/runs/{TASK}/*/logs"))
    for log in ("step_0001_val.log", "final_val.log", "final_test.log"):
        report = attack_report((logs / log).read_text())
        assert report["scanned"] > 0 and report["found"] == [], (log, report)


def test_the_experiment_and_the_evaluator_share_one_episode_protocol():
    # the evaluator redraws the validation episodes with its own copy of episodes.py: the copies must agree
    task = REPO / "task_suites" / TASK
    assert (task / "workspace" / "episodes.py").read_bytes() == (task / "harness" / "episodes.py").read_bytes()
