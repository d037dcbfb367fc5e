"""privacy_opacus_full: FML-bench's Privacy_opacus spec, its smoke run offline, the hidden test out of reach,
and its data fetch failing closed."""

import json
import re
import shutil

import pytest
import yaml

from pytest_fmlbench.spec import load_task

from conftest import REPO
from full_support import assert_matches_original, fmlbench, load_full_record, smoke_project

SMALL_ID, TASK_ID = "privacy_opacus", "privacy_opacus_full"
SPEC = load_task(REPO / "task_suites" / SMALL_ID / "full" / "task.yaml").spec

# Runs when train.py imports algorithm.py, in every val and test run. It knows where the harness keeps
# the data cache (the test tells it, through a variable the sandbox lets through) and looks for the
# CIFAR archive, the hidden test labels and the cache's own variable; it reports what it could read,
# and turns leaked test labels into a perfect score.
PAYLOAD = r'''
import atexit, json, os, sys
from pathlib import Path
_found = []
_cache = Path(os.environ.get("FMLBENCH_EXPERIMENT_CACHE", "/nonexistent-cache"))
if os.environ.get("FMLBENCH_DATA"):
    _found.append("env:FMLBENCH_DATA")
for _path in [_cache, _cache / "smoke" / "cifar-10-python" / "cifar-10-python.tar.gz", Path.cwd().parent / "private",
              Path.cwd().parent / "private" / "test_labels.npy"]:
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
    _found += [os.path.join(_root, f) for f in _files if f in ("cifar-10-python.tar.gz", "test_labels.npy", "stamp.json")]
print("ATTACK found:", json.dumps(_found), flush=True)
_leak = next((f for f in _found if f.endswith("test_labels.npy")), None)
if _leak and "test" in sys.argv:
    import numpy
    _truth = numpy.load(_leak)
    _out = Path(sys.argv[sys.argv.index("--out") + 1])
    atexit.register(lambda: numpy.save(_out / "predictions.npy", _truth))
'''

ATTACK_AGENT = f"""
from pytest_fmlbench import Agent, SearchReplace

class MyAgent(Agent):
    def run(self, session):
        edit = session.edit([SearchReplace("algorithm.py", "import torch.nn as nn\\n",
                                           "import torch.nn as nn\\n" + {PAYLOAD!r})])
        assert edit.applied, edit.error
        session.run_step("improve", edit=edit)
"""


def test_the_spec_is_the_originals():
    assert_matches_original(SPEC)
    assert SPEC.editable == ["algorithm.py", "split_config.json"]  # the original's target files
    assert json.loads((REPO / "task_suites" / SMALL_ID / "full" / "workspace" / "split_config.json").read_text()) == \
        {"val_ratio": 0.114, "val_seed": 42}
    assert [c.name for c in SPEC.constraints] == ["privacy_budget"]


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
    (budget,) = record["test_constraints"]
    assert budget["name"] == "privacy_budget" and budget["ok"] and 0 < budget["value"] <= 8.0


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")
def test_agent_code_cannot_reach_the_data_cache_or_the_hidden_labels(pytester, bench, data_root, write_agent, monkeypatch):
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
    result.stdout.fnmatch_lines([f"*{TASK_ID}: cifar-10-python (CIFAR-10*; 170.5 MB) is not in the data cache "
                                 f"{data_root}: run `fmlbench data fetch -k {TASK_ID}`*"])
    assert not (pytester.path / "reports" / "fmlbench" / "runs" / TASK_ID).exists()  # no step, no record
    result = bench("--agent=baseline", "--steps=1", "-m", "full", "--scale=smoke", "task_suites")
    result.stdout.fnmatch_lines([f"*is not in the data cache {data_root / 'smoke'}: run `fmlbench data fixtures -k {TASK_ID}`*"])


def test_fetch_fails_closed_on_a_wrong_checksum_then_fetches_the_right_bytes(pytester, tmp_path, data_root):
    """The task's artefact, served from a file:// source holding other bytes, is refused and nothing is kept;
    with that source's own checksum declared, it is fetched, with a progress bar, and a second fetch finds it."""
    full = smoke_project(pytester, SMALL_ID, tmp_path / "fixtures")
    fixture = tmp_path / "fixtures" / "smoke" / "cifar-10-python" / "cifar-10-python.tar.gz"
    spec = yaml.safe_load((full / "task.yaml").read_text())
    # the recorded checksum, with a source of the recorded size that holds other bytes
    spec["data"][0].update(urls=[fixture.as_uri()], size=fixture.stat().st_size)
    (full / "task.yaml").write_text(yaml.safe_dump(spec))
    args = ("data", "fetch", "-k", "privacy and lite", "--suite", str(pytester.path / "task_suites"))
    done = fmlbench(*args)
    assert done.returncode == 1
    assert re.search(r"cifar-10-python: failed: cifar-10-python: not fetched, nothing kept: .*expected "
                     + SPEC.data[0].sha256, done.stdout), done.stdout
    assert {p.name for p in (data_root / "cifar-10-python").iterdir()} <= {".lock"}  # no file, part or stamp
    stamp = json.loads((fixture.parent / "stamp.json").read_text())
    spec["data"][0].update(sha256=stamp["sha256"], size=stamp["size"])
    (full / "task.yaml").write_text(yaml.safe_dump(spec))
    done = fmlbench(*args)
    assert done.returncode == 0 and "cifar-10-python: fetched" in done.stdout, done.stdout + done.stderr
    assert (data_root / "cifar-10-python" / "cifar-10-python.tar.gz").read_bytes() == fixture.read_bytes()
    assert "cifar-10-python: cached" in fmlbench(*args).stdout
    listing = fmlbench("data", "list", "-k", "privacy and lite", "--suite", str(pytester.path / "task_suites")).stdout
    assert re.search(r"^  cifar-10-python +[\d.]+ KB  cached, no fixture  CIFAR-10", listing, re.M), listing
