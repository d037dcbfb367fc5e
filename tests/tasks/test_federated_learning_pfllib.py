"""federated_learning_pfllib: the baseline reproduces task.yaml, and the method's code cannot reach the
hidden test labels, the harness (with the partition seeds) or the data files behind train.py's back."""

import json
import shutil

import pytest

from pytest_fmlbench.spec import load_task

from conftest import REPO, load_record

TASK = "federated_learning_pfllib"
SPEC = load_task(REPO / "task_suites" / TASK / "task.yaml").spec


@pytest.fixture
def task_dir(pytester):
    shutil.copytree(REPO / "task_suites" / TASK, pytester.path / "task_suites" / TASK,
                    ignore=shutil.ignore_patterns("__pycache__"))
    return pytester.path / "task_suites" / TASK


def test_baseline_reproduces_the_declared_values(pytester, task_dir, bench):
    result = bench("--agent=baseline", "--steps=1", "task_suites")
    result.assert_outcomes(passed=1)
    record = load_record(pytester.path, TASK)
    assert record["integrity"] == "ok"
    assert record["best_val"] == pytest.approx(SPEC.baseline.val, abs=1e-9)
    assert record["test_metric"] == pytest.approx(SPEC.baseline.test, abs=1e-9)


# Runs when algorithm.py is imported, i.e. inside the experiment, in the val step and in the final
# val and test runs. It reports what it could read; the test asserts it read nothing that matters.
PAYLOAD = '''
import glob as _glob, os as _os, sys as _sys
import numpy as _np
_found, _refused = [], []
def _try(what, action):
    try:
        _found.append((what, repr(action())[:80]))
    except Exception as exc:
        _refused.append((what, type(exc).__name__))
_out = _sys.argv[_sys.argv.index("--out") + 1]
for _path in ["../private", _os.path.join(_out, "..", "..", "private")]:
    _try("list " + _path, lambda: [f for f in _os.listdir(_path)])
    for _f in ("test_y.npy", "test_client.npy", "visible_y.npy"):
        _try("read " + _f, lambda: _np.load(_os.path.join(_path, _f)))
_try("harness", lambda: open(HARNESS + "/fed_data.py").read())
_try("harness listing", lambda: _os.listdir(HARNESS) or None)
for _f in ("data/visible_y.npy", "data/visible_X.npy", _os.path.join(_out, "test_X.npy")):
    _try("bypass " + _f, lambda: _np.load(_f))
# another run folder's private copy of the visible labels is no secret (data/ has them); test labels are
_try("scan", lambda: [_os.path.relpath(p, PROJECT) for p in _glob.glob(PROJECT + "/**/test_y.npy", recursive=True)]
     or None)
_found = [(w, v) for w, v in _found if v not in ("[]", "None")]
print("ATTACK", __import__("json").dumps({"found": _found, "refused": _refused}))
'''


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")
def test_method_code_cannot_reach_hidden_labels_harness_or_data(pytester, task_dir, bench, write_agent):
    payload = PAYLOAD.replace("HARNESS", repr(str(task_dir / "harness"))).replace("PROJECT", repr(str(pytester.path)))
    agent = write_agent(f'''
        from pytest_fmlbench import Agent, SearchReplace

        class MyAgent(Agent):
            def run(self, session):
                edit = session.edit([SearchReplace("algorithm.py", "import torch.nn as nn\\n",
                                                   "import torch.nn as nn\\n" + {payload!r})])
                assert edit.applied, edit.error
                session.run_step("improve", edit=edit)
    ''')
    result = bench(f"--agent={agent}", "task_suites")
    result.assert_outcomes(passed=1)
    record = load_record(pytester.path, TASK)
    assert record["integrity"] == "ok" and record["valid_steps"] == 1
    # the payload does not change the method, so the scores are the baseline's
    assert record["best_val"] == pytest.approx(SPEC.baseline.val, abs=1e-9)
    assert record["test_metric"] == pytest.approx(SPEC.baseline.test, abs=1e-9)
    logs = sorted(pytester.path.glob(f"reports/fmlbench/runs/{TASK}/*/logs/*.log"))
    reports = [json.loads(line.split("ATTACK ", 1)[1]) for log in logs for line in log.read_text().splitlines()
               if line.startswith("ATTACK ")]
    assert len(reports) == 3  # the val step, the final val re-run and the test run
    for report in reports:
        assert report["found"] == [], report
        refused = dict(map(tuple, report["refused"]))
        assert refused["bypass data/visible_y.npy"] == "ProtocolError", refused
