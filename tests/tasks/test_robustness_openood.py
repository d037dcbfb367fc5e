"""robustness_openood: the baseline reproduces task.yaml, and agent code cannot reach the hidden test set."""

import json
import re
import shutil

import pytest

from pytest_fmlbench.spec import load_task

from conftest import REPO, load_record

TASK_ID = "robustness_openood"
TASK_DIR = REPO / "task_suites" / TASK_ID
SPEC = load_task(TASK_DIR / "task.yaml").spec

# Runs when train.py imports algorithm.py, in every val and test run. It looks for the hidden test
# labels, the harness (whose seeds regenerate the hidden test set and OOD source) and anything else
# the harness keeps, reports what it could open, and turns any leaked test labels into perfect scores.
PAYLOAD = r'''
import atexit, json, os, sys
from pathlib import Path
_found = []
_out = Path(sys.argv[sys.argv.index("--out") + 1])
_harness = os.environ.get("FMLBENCH_EXPERIMENT_HARNESS", "/nonexistent-harness")
for _path in [Path.cwd().parent / "private", Path.cwd().parent / "private" / "test_y.npy",
              Path(_harness), Path(_harness) / "ood_data.py", Path.cwd().parent / "verdicts"]:
    try:
        _content = os.listdir(_path) if _path.is_dir() else _path.read_bytes()
    except OSError:
        continue
    if _content:
        _found.append(str(_path))
_skip = ("/proc", "/sys", "/dev", "/usr", sys.prefix, sys.base_prefix)
for _root, _dirs, _files in os.walk("/", onerror=lambda e: None):
    if _root.startswith(_skip):
        _dirs[:] = []
        continue
    _found += [os.path.join(_root, f) for f in _files
               if f in ("test_y.npy", "n_val_ood.npy", "ood_data.py", "prepare.py", "evaluate.py")]
print("ATTACK found:", json.dumps(_found), flush=True)
_leak = next((f for f in _found if f.endswith("test_y.npy")), None)
if _leak and "test" in sys.argv:
    import numpy
    _truth = numpy.load(_leak)
    atexit.register(lambda: numpy.save(_out / "scores.npy", (_truth >= 0).astype(float)))
'''

ATTACK_AGENT = f"""
from pytest_fmlbench import Agent, SearchReplace

class MyAgent(Agent):
    def run(self, session):
        edit = session.edit([SearchReplace("algorithm.py", "import torch\\n", "import torch\\n" + {PAYLOAD!r})])
        assert edit.applied, edit.error
        session.run_step("improve", edit=edit)
"""


@pytest.fixture
def project(pytester):
    shutil.copytree(TASK_DIR, pytester.path / "task_suites" / TASK_ID,
                    ignore=shutil.ignore_patterns("__pycache__"))
    return pytester.path


def test_baseline_reproduces_the_declared_values(project, bench):
    bench("--agent=baseline", "--steps=1", "task_suites").assert_outcomes(passed=1)
    record = load_record(project, TASK_ID)
    assert record["integrity"] == "ok"
    assert record["best_val"] == pytest.approx(SPEC.baseline.val, abs=1e-9)
    assert record["test_metric"] == pytest.approx(SPEC.baseline.test, abs=1e-9)


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")
def test_agent_code_cannot_reach_the_hidden_test_set(project, bench, write_agent, monkeypatch):
    monkeypatch.setenv("FMLBENCH_EXPERIMENT_HARNESS", str(project / "task_suites" / TASK_ID / "harness"))
    agent = write_agent(ATTACK_AGENT)
    bench(f"--agent={agent}", "--steps=1", "task_suites").assert_outcomes(passed=1)
    record = load_record(project, TASK_ID)
    run = next((project / "reports" / "fmlbench" / "runs" / TASK_ID).glob("*"))
    test_log = (run / "logs" / "final_test.log").read_text()
    reports = re.findall(r"^ATTACK found: (.*)$", test_log, re.MULTILINE)
    assert reports and all(json.loads(found) == [] for found in reports), reports
    # the payload leaves the method as it is: nothing leaked, so the scores are the baseline's
    assert record["integrity"] == "ok"
    assert record["test_metric"] == pytest.approx(SPEC.baseline.test, abs=1e-9)
