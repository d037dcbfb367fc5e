"""unlearning_open_unlearning: the baseline reproduces task.yaml, and agent code cannot reach the
retain-only reference, the hidden test items or the harness."""

import json
import re
import shutil
import subprocess
import sys

import pytest

from pytest_fmlbench.spec import load_task

from conftest import REPO, load_record

TASK_ID = "unlearning_open_unlearning"
TASK_DIR = REPO / "task_suites" / TASK_ID
SPEC = load_task(TASK_DIR / "task.yaml").spec

# Runs when train.py imports algorithm.py, in every val and test run. It looks for the retain-only
# reference (truth ratios), the harness (whose seeds regenerate the hidden test items) and anything
# else the harness keeps, and reports what it could open.
PAYLOAD = r'''
import json, os, sys
from pathlib import Path
_found = []
_harness = os.environ.get("FMLBENCH_EXPERIMENT_HARNESS", "/nonexistent-harness")
for _path in [Path.cwd().parent / "private", Path(_harness) / "reference" / "reference.json",
              Path(_harness), Path(_harness) / "authors.py", Path.cwd().parent / "verdicts"]:
    try:
        _content = os.listdir(_path) if _path.is_dir() else _path.read_bytes()
    except OSError:
        continue
    if _content:
        _found.append(str(_path))
_skip = ("/proc", "/sys", "/dev", "/usr", sys.prefix, sys.base_prefix, str(Path.cwd()))
for _root, _dirs, _files in os.walk("/", onerror=lambda e: None):
    if _root.startswith(_skip):
        _dirs[:] = []
        continue
    _found += [os.path.join(_root, f) for f in _files
               if f in ("reference.json", "full_model.safetensors", "authors.py", "build_reference.py",
                         "prepare.py", "evaluate.py")]
print("ATTACK found:", json.dumps(_found), flush=True)
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


CHECK_REFERENCE = """
import json, sys
import numpy as np
import torch
from safetensors.torch import load_model
from authors import population
from lm import make_model, truth_ratios
from recipe import REFERENCE_DIR, fingerprint
reference = json.loads((REFERENCE_DIR / "reference.json").read_text())
assert reference["fingerprint"] == fingerprint(), "reference/ is stale: run build_reference.py"
torch.set_num_threads(1)
pop = population()
model = make_model(len(pop["vocab"]))
load_model(model, str(REFERENCE_DIR / "full_model.safetensors"))
for split in ("val", "test"):
    ratios = truth_ratios(model, pop[split + "_items"], pop["vocab"])
    np.testing.assert_allclose(ratios, reference["full_model"][split], rtol=1e-6)
    assert len(reference["retain_model"][split]) == len(ratios)
print("reference ok")
"""


def test_the_shipped_models_match_the_recipe_that_built_them():
    """The full model in reference/ is the one the recorded truth ratios came from, built by this code."""
    done = subprocess.run([sys.executable, "-c", CHECK_REFERENCE], cwd=TASK_DIR / "harness",
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "reference ok" in done.stdout, done.stderr[-2000:]
