"""data_efficiency_usb_full: FML-bench's Data_Efficiency_usb spec and splits, its smoke run offline, the hidden
labels out of agent code's reach, and its data fetch failing closed."""

import importlib
import json
import re
import shutil
import sys

import numpy as np
import pytest
import yaml

from pytest_fmlbench.spec import load_task

from conftest import REPO
from full_support import assert_matches_original, fmlbench, load_full_record, smoke_project

SMALL_ID, TASK_ID = "data_efficiency_usb", "data_efficiency_usb_full"
FULL = REPO / "task_suites" / SMALL_ID / "full"
SPEC = load_task(FULL / "task.yaml").spec

# Runs when train.py imports algorithm.py, in every val and test run. It knows where the harness keeps the
# data cache (the test tells it, through a variable the sandbox lets through) and looks for the CIFAR-100
# archive and the val and test labels; it reports what it could read, and turns leaked labels into predictions.
PAYLOAD = r'''
import atexit, json, os, sys
from pathlib import Path
_found = []
_cache = Path(os.environ.get("FMLBENCH_EXPERIMENT_CACHE", "/nonexistent-cache"))
if os.environ.get("FMLBENCH_DATA"):
    _found.append("env:FMLBENCH_DATA")
for _path in [_cache, _cache / "smoke" / "cifar-100-python" / "cifar-100-python.tar.gz",
              Path.cwd().parent / "private", Path.cwd().parent / "private" / "val_labels.npy"]:
    try:
        _content = os.listdir(_path) if _path.is_dir() else _path.read_bytes()
    except OSError:
        continue
    if _content:
        _found.append(str(_path))
_skip = ("/proc", "/sys", "/dev", "/usr", sys.prefix, sys.base_prefix)
_wanted = ("cifar-100-python.tar.gz", "val_labels.npy", "test_labels.npy", "stamp.json")
for _root, _dirs, _files in os.walk("/", onerror=lambda e: None):
    if _root.startswith(_skip):
        _dirs[:] = []
        continue
    _found += [os.path.join(_root, f) for f in _files if f in _wanted]
print("ATTACK found:", json.dumps(_found), flush=True)
_leak = next((f for f in _found if f.endswith("test_labels.npy")), None)
if _leak and "test" in sys.argv:
    import numpy
    _out = Path(sys.argv[sys.argv.index("--out") + 1])
    atexit.register(lambda: numpy.save(_out / "predictions.npy", numpy.load(_leak)))
'''

ATTACK_AGENT = f"""
from pytest_fmlbench import Agent, SearchReplace

class MyAgent(Agent):
    def run(self, session):
        edit = session.edit([SearchReplace("algorithm.py", "import numpy as np\\n",
                                           "import numpy as np\\n" + {PAYLOAD!r})])
        assert edit.applied, edit.error
        session.run_step("improve", edit=edit)
"""


def test_the_spec_is_the_originals():
    assert_matches_original(SPEC)
    assert SPEC.editable == ["algorithm.py"]  # the original's only target file: no editable split
    assert SPEC.constraints == []


def test_the_labelled_set_and_the_hidden_test_are_the_originals():
    sys.path.insert(0, str(FULL / "harness"))
    try:
        prepare = importlib.import_module("prepare")
    finally:
        sys.path.remove(str(FULL / "harness"))
        sys.modules.pop("prepare", None)
    labels = np.repeat(np.arange(100), 500)  # CIFAR-100's training set: 500 images per class
    labelled = prepare.labelled_indices(labels)
    assert len(labelled) == 200 and (np.bincount(labels[labelled], minlength=100) == 2).all()
    # the original: np.random.seed(42), then per class in order np.random.shuffle(its indices), its first 2
    np.random.seed(42)
    expected = []
    for c in range(100):
        members = np.where(labels == c)[0]
        np.random.shuffle(members)
        expected.extend(members[:2])
    assert labelled.tolist() == [int(i) for i in expected]
    val, test = prepare.val_test_indices(10_000)
    assert len(val) == 3000 and len(test) == 7000 and not set(val) & set(test)
    assert val.tolist() == np.random.RandomState(42).permutation(10_000)[:3000].tolist()


@pytest.fixture
def data_root(tmp_path, monkeypatch):
    root = tmp_path / "fmlbench-data"
    monkeypatch.setenv("FMLBENCH_DATA", str(root))
    return root


def test_the_smoke_run_passes_offline(pytester, bench, data_root):
    smoke_project(pytester, SMALL_ID, data_root)
    bench("--agent=baseline", "--steps=1", "-m", "full", "--scale=smoke", "task_suites").assert_outcomes(passed=1)
    record = load_full_record(pytester.path, TASK_ID)
    assert record["scale"] == "smoke" and record["integrity"] == "ok" and record["status"] == "finished"
    assert record["valid_steps"] == 1 and 0 <= record["test_metric"] <= 1


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")
def test_agent_code_cannot_reach_the_data_cache_or_the_labels(pytester, bench, data_root, write_agent, monkeypatch):
    smoke_project(pytester, SMALL_ID, data_root)
    monkeypatch.setenv("FMLBENCH_EXPERIMENT_CACHE", str(data_root))
    agent = write_agent(ATTACK_AGENT)
    bench(f"--agent={agent}", "--steps=1", "-m", "full", "--scale=smoke", "task_suites").assert_outcomes(passed=1)
    record = load_full_record(pytester.path, TASK_ID)
    run = next((pytester.path / "reports" / "fmlbench" / "runs" / TASK_ID).glob("*"))
    reports = [line for log in ("step_0001_val.log", "final_val.log", "final_test.log")
               for line in re.findall(r"^ATTACK found: (.*)$", (run / "logs" / log).read_text(), re.MULTILINE)]
    assert len(reports) == 3 and all(json.loads(found) == [] for found in reports), reports
    assert record["integrity"] == "ok" and record["test_metric"] < 1.0


def test_missing_data_is_one_line_before_any_step(pytester, bench, data_root):
    shutil.copytree(REPO / "task_suites" / SMALL_ID, pytester.path / "task_suites" / SMALL_ID,
                    ignore=shutil.ignore_patterns("__pycache__"))
    result = bench("--agent=baseline", "--steps=1", "-m", "full", "task_suites")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([f"*{TASK_ID}: cifar-100-python (CIFAR-100*; 169.0 MB) is not in the data cache "
                                 f"{data_root}: run `fmlbench data fetch -k {TASK_ID}`*"])
    assert not (pytester.path / "reports" / "fmlbench" / "runs" / TASK_ID).exists()


def test_fetch_fails_closed_on_a_wrong_checksum(pytester, tmp_path, data_root):
    """CIFAR-100 served from a file:// source of the recorded size holding other bytes: refused, nothing kept."""
    full = smoke_project(pytester, SMALL_ID, tmp_path / "fixtures")
    fixture = tmp_path / "fixtures" / "smoke" / "cifar-100-python" / "cifar-100-python.tar.gz"
    spec = yaml.safe_load((full / "task.yaml").read_text())
    spec["data"][0].update(urls=[fixture.as_uri()], size=fixture.stat().st_size)
    (full / "task.yaml").write_text(yaml.safe_dump(spec))
    done = fmlbench("data", "fetch", "-k", TASK_ID, "--suite", str(pytester.path / "task_suites"))
    assert done.returncode == 1
    assert re.search(r"cifar-100-python: failed: cifar-100-python: not fetched, nothing kept: .*expected "
                     + SPEC.data[0].sha256, done.stdout), done.stdout
    assert {p.name for p in (data_root / "cifar-100-python").iterdir()} <= {".lock"}
