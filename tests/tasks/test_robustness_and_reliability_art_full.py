"""robustness_and_reliability_art_full: FML-bench's Robustness_and_Reliability_art spec, its poisoning protocol,
its smoke run offline, the hidden test and the poison marks out of reach, and its data fetch failing closed."""

import importlib
import json
import re
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from pytest_fmlbench.scoring.original import builtin_tasks
from pytest_fmlbench.spec import load_task

from conftest import REPO
from full_support import assert_matches_original, fmlbench, load_full_record, smoke_project

SMALL_ID, TASK_ID = "robustness_and_reliability_art", "robustness_and_reliability_art_full"
FULL = REPO / "task_suites" / SMALL_ID / "full"
SPEC = load_task(FULL / "task.yaml").spec
# MNIST's published class counts (test set): they set the sizes of the original's splits
MNIST_TEST_COUNTS = [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]

# Runs when train.py imports model.py, in every val and test run. It knows where the harness keeps the data
# cache and the task's harness (the test tells it, through variables the sandbox lets through) and looks for
# MNIST, the poison marks, the hidden labels and the trigger code; it reports what it could read, and turns
# leaked test labels into predictions.
PAYLOAD = r'''
import atexit, json, os, sys
from pathlib import Path
_found = []
_cache = Path(os.environ.get("FMLBENCH_EXPERIMENT_CACHE", "/nonexistent-cache"))
_harness = Path(os.environ.get("FMLBENCH_EXPERIMENT_HARNESS", "/nonexistent-harness"))
if os.environ.get("FMLBENCH_DATA"):
    _found.append("env:FMLBENCH_DATA")
for _path in [_cache, _cache / "smoke" / "mnist" / "mnist.npz", _harness, _harness / "poisoned_mnist.py",
              Path.cwd().parent / "private", Path.cwd().parent / "private" / "pool0_is_poison.npy"]:
    try:
        _content = os.listdir(_path) if _path.is_dir() else _path.read_bytes()
    except OSError:
        continue
    if _content:
        _found.append(str(_path))
_skip = ("/proc", "/sys", "/dev", "/usr", sys.prefix, sys.base_prefix)
_wanted = ("mnist.npz", "pool0_is_poison.npy", "test0_is_poison.npy", "test0_y.npy", "poisoned_mnist.py", "stamp.json")
for _root, _dirs, _files in os.walk("/", onerror=lambda e: None):
    if _root.startswith(_skip):
        _dirs[:] = []
        continue
    _found += [os.path.join(_root, f) for f in _files if f in _wanted]
print("ATTACK found:", json.dumps(_found), flush=True)
_leaks = {Path(f).name: Path(f).parent for f in _found if f.endswith("_y.npy")}
if "test0_y.npy" in _leaks and "test" in sys.argv:
    import numpy
    _out = Path(sys.argv[sys.argv.index("--out") + 1])
    def _cheat():
        for _i in range(5):
            numpy.save(_out / f"predictions{_i}.npy", numpy.load(_leaks["test0_y.npy"] / f"test{_i}_y.npy"))
    atexit.register(_cheat)
'''

ATTACK_AGENT = f"""
from pytest_fmlbench import Agent, SearchReplace

class MyAgent(Agent):
    def run(self, session):
        edit = session.edit([SearchReplace("model.py", "import torch.nn as nn\\n",
                                           "import torch.nn as nn\\n" + {PAYLOAD!r})])
        assert edit.applied, edit.error
        session.run_step("improve", edit=edit)
"""


@pytest.fixture(scope="module")
def harness_modules():
    """The harness's poisoning and preparation modules, imported as prepare.py imports them."""
    sys.path.insert(0, str(FULL / "harness"))
    try:
        yield importlib.import_module("poisoned_mnist"), importlib.import_module("prepare")
    finally:
        sys.path.remove(str(FULL / "harness"))
        for name in ("poisoned_mnist", "prepare"):
            sys.modules.pop(name, None)


def test_the_spec_is_the_originals():
    assert_matches_original(SPEC)
    original = builtin_tasks()[SPEC.original.task]
    # the original's target files (one inside its ART checkout), by name
    assert SPEC.editable == [Path(f).name for f in original.target_files]
    assert json.loads((FULL / "workspace" / "split_config.json").read_text()) == {"val_ratio": 0.20, "val_seed": 42}
    assert SPEC.original.pinned_commit == "527b5b6b768b2282fe30ee8785d06eafaceb1c01"


def test_the_triggers_and_the_poisoning_are_the_originals(harness_modules):
    poisoned_mnist, _ = harness_modules
    blank = np.zeros((2, 28, 28), dtype=np.uint8)
    lit = {name: {tuple(p) for p in np.argwhere(trigger(blank)[0] == 255)}
           for name, trigger in poisoned_mnist.triggers(255).items()}
    assert list(lit) == ["pattern", "distributed", "edge", "random_corner", "pattern_topleft"]
    assert lit["pattern"] == {(26, 26), (25, 25), (26, 24), (24, 26)}  # ART's add_pattern_bd, distance 2
    assert lit["distributed"] == {(r + a, c + b) for r, c in [(2, 2), (24, 2), (2, 24), (14, 14)]
                                  for a in (0, 1) for b in (0, 1)}
    assert lit["edge"] == {(0, c) for c in range(7, 21, 2)} | {(r, 27) for r in range(7, 21, 2)}
    assert lit["random_corner"] == {(25, 25), (24, 24), (25, 23), (23, 25)}  # the corner RandomState(233) draws
    assert lit["pattern_topleft"] == {(2, 2), (3, 3), (2, 4), (4, 2)}

    labels = np.repeat(np.arange(10), 30)
    images = np.zeros((300, 28, 28), np.uint8)
    images[:, 0, 0] = labels  # each image names its class, so that a poison shows its source
    x, y, is_poison = poisoned_mnist.poison(images, labels, poisoned_mnist.triggers(255)["pattern"],
                                            np.random.RandomState(0))
    assert (x[:300] == images).all() and (y[:300] == labels).all()  # the clean set first, unchanged
    assert not is_poison[:300].any() and is_poison[300:].all()
    assert is_poison.sum() == 10 * round(0.33 * 30 / 0.67)  # per class: poisons are a third of the result
    sources = x[is_poison][:, 0, 0].astype(int)
    assert (x[is_poison][:, 26, 26] == 255).all() and (y[is_poison] == (sources + 1) % 10).all()  # all-to-all
    assert set(sources) == set(range(10))


def test_the_hidden_test_is_the_originals(harness_modules):
    _, prepare = harness_modules
    labels = np.concatenate([np.full(n, c) for c, n in enumerate(MNIST_TEST_COUNTS)])
    visible, hidden = prepare.stratified_hidden_test(labels)
    assert len(hidden) == 6996 and len(visible) == 3004  # 7,500 selected + 3,004 = the original's 10,504 visible
    assert not set(visible) & set(hidden) and len(set(visible) | set(hidden)) == len(labels)
    again_visible, again_hidden = prepare.stratified_hidden_test(labels)
    assert (again_hidden == hidden).all() and (again_visible == visible).all()


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
def test_agent_code_cannot_reach_the_data_the_marks_or_the_triggers(pytester, bench, data_root, write_agent,
                                                                     monkeypatch):
    smoke_project(pytester, SMALL_ID, data_root)
    monkeypatch.setenv("FMLBENCH_EXPERIMENT_CACHE", str(data_root))
    monkeypatch.setenv("FMLBENCH_EXPERIMENT_HARNESS", str(pytester.path / "task_suites" / SMALL_ID / "full" / "harness"))
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
    result.stdout.fnmatch_lines([f"*{TASK_ID}: mnist (MNIST, Keras's mnist.npz*; 11.5 MB) is not in the data cache "
                                 f"{data_root}: run `fmlbench data fetch -k {TASK_ID}`*"])
    assert not (pytester.path / "reports" / "fmlbench" / "runs" / TASK_ID).exists()


def test_fetch_fails_closed_on_a_wrong_checksum(pytester, tmp_path, data_root):
    """MNIST served from a file:// source of the recorded size holding other bytes: refused, nothing kept."""
    full = smoke_project(pytester, SMALL_ID, tmp_path / "fixtures")
    fixture = tmp_path / "fixtures" / "smoke" / "mnist" / "mnist.npz"
    spec = yaml.safe_load((full / "task.yaml").read_text())
    spec["data"][0].update(urls=[fixture.as_uri()], size=fixture.stat().st_size)
    (full / "task.yaml").write_text(yaml.safe_dump(spec))
    done = fmlbench("data", "fetch", "-k", TASK_ID, "--suite", str(pytester.path / "task_suites"))
    assert done.returncode == 1
    assert re.search(r"mnist: failed: mnist: not fetched, nothing kept: .*expected " + SPEC.data[0].sha256,
                     done.stdout), done.stdout
    assert {p.name for p in (data_root / "mnist").iterdir()} <= {".lock"}
