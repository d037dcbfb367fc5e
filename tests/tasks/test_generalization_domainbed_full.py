"""generalization_domainbed_full: FML-bench's Generalization_domainbed spec, DomainBed's files in the
workspace, its smoke run offline, the hidden test out of reach, one-line preflight, fetch failing closed."""

import json
import re
import shutil

import pytest
import yaml

from pytest_fmlbench.scoring.original import builtin_tasks
from pytest_fmlbench.spec import load_task

from conftest import REPO
from full_support import assert_matches_original, fmlbench, load_full_record, smoke_project

SMALL_ID, TASK_ID = "generalization_domainbed", "generalization_domainbed_full"
SPEC = load_task(REPO / "task_suites" / SMALL_ID / "full" / "task.yaml").spec

# Runs when train.py imports DomainBed's algorithms.py, in every val and test run. It knows where the
# harness keeps the data cache (the test tells it, through a variable the sandbox lets through) and looks
# for the MNIST archive, the hidden labels and the cache's own variable; it reports what it could read,
# and turns leaked test labels into a perfect score.
PAYLOAD = r'''
import atexit, json, os, sys
from pathlib import Path
_found = []
_cache = Path(os.environ.get("FMLBENCH_EXPERIMENT_CACHE", "/nonexistent-cache"))
if os.environ.get("FMLBENCH_DATA"):
    _found.append("env:FMLBENCH_DATA")
for _path in [_cache, _cache / "smoke" / "mnist-npz" / "mnist.npz", _cache / "smoke" / "domainbed" / "src",
              Path.cwd().parent / "private", Path.cwd().parent / "private" / "test_labels.npy"]:
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
               if f in ("mnist.npz", "test_labels.npy", "val_labels.npy", "stamp.json")]
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
        edit = session.edit([SearchReplace("domainbed/algorithms.py", "import torch.nn.functional as F\\n",
                                           "import torch.nn.functional as F\\n" + {PAYLOAD!r})])
        assert edit.applied, edit.error
        session.run_step("improve", edit=edit)
"""


def test_the_spec_is_the_originals():
    assert_matches_original(SPEC)
    facts = builtin_tasks()[SPEC.original.task]
    assert tuple(SPEC.editable) == facts.target_files  # DomainBed's algorithms.py and networks.py
    assert SPEC.constraints == [] and "split_config.json" not in SPEC.editable  # the original's split is fixed
    (domainbed,) = [a for a in SPEC.data if a.kind == "git"]
    assert domainbed.commit == SPEC.original.pinned_commit
    (copy,) = SPEC.upstream
    assert copy.artifact == domainbed.name and all(copy.covers(path) for path in SPEC.editable)


@pytest.fixture
def data_root(tmp_path, monkeypatch):
    root = tmp_path / "fmlbench-data"
    monkeypatch.setenv("FMLBENCH_DATA", str(root))
    return root


def test_the_smoke_run_passes_offline_on_domainbeds_files(pytester, bench, data_root):
    smoke_project(pytester, SMALL_ID, data_root)
    bench("--agent=baseline", "--steps=1", "-m", "full", "--scale=smoke", "task_suites").assert_outcomes(passed=1)
    record = load_full_record(pytester.path, TASK_ID)
    assert record["scale"] == "smoke" and record["integrity"] == "ok" and record["status"] == "finished"
    assert record["valid_steps"] == 1 and 0 <= record["test_metric"] <= 1
    run = next((pytester.path / "reports" / "fmlbench" / "runs" / TASK_ID).glob("*"))
    # the workspace holds the checkout's files (the smoke stand-in's), and the driver trained with them
    checkout = data_root / "smoke" / "domainbed" / "src"
    for rel in ("domainbed/algorithms.py", "domainbed/networks.py", "domainbed/lib/fast_data_loader.py"):
        assert (run / "search" / "workspace" / rel).read_bytes() == (checkout / rel).read_bytes()
    log = (run / "logs" / "step_0001_val.log").read_text()
    assert re.search(r"^step=2 .*env0_out_acc=", log, re.M), log


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
    result.stdout.fnmatch_lines([f"*{TASK_ID}: mnist-npz (MNIST*; 11.5 MB) is not in the data cache "
                                 f"{data_root}: run `fmlbench data fetch -k {TASK_ID}`*"])
    assert not (pytester.path / "reports" / "fmlbench" / "runs" / TASK_ID).exists()  # no step, no record


def test_fetch_fails_closed_then_fetches_the_archive_and_domainbed_at_its_commit(pytester, tmp_path, data_root):
    """The archive, served from a file:// source holding other bytes, is refused and nothing is kept; with that
    source's own checksum declared it is fetched. DomainBed comes from a fixture repository: a commit it does
    not hold is refused, its own commit is checked out."""
    full = smoke_project(pytester, SMALL_ID, tmp_path / "fixtures")
    fixtures = tmp_path / "fixtures" / "smoke"
    archive = fixtures / "mnist-npz" / "mnist.npz"
    spec = yaml.safe_load((full / "task.yaml").read_text())
    archive_spec, repo_spec = spec["data"]
    archive_spec.update(urls=[archive.as_uri()], size=archive.stat().st_size)  # the recorded checksum, other bytes
    repo_spec.update(urls=[(fixtures / "domainbed" / "src").as_uri()])  # the pinned commit is not in it
    (full / "task.yaml").write_text(yaml.safe_dump(spec))
    args = ("data", "fetch", "-k", TASK_ID, "--suite", str(pytester.path / "task_suites"))
    done = fmlbench(*args)
    assert done.returncode == 1
    assert re.search(r"mnist-npz: failed: mnist-npz: not fetched, nothing kept: .*expected " + SPEC.data[0].sha256,
                     done.stdout), done.stdout
    assert re.search(r"domainbed: failed: .*" + SPEC.data[1].commit, done.stdout), done.stdout
    assert not (data_root / "mnist-npz" / "mnist.npz").exists() and not (data_root / "domainbed" / "src").exists()
    for artifact in (archive_spec, repo_spec):
        stamp = json.loads((fixtures / artifact["name"] / "stamp.json").read_text())
        artifact.update({key: stamp[key] for key in ("sha256", "size", "commit") if key in stamp})
    (full / "task.yaml").write_text(yaml.safe_dump(spec))
    done = fmlbench(*args)
    assert done.returncode == 0 and "mnist-npz: fetched" in done.stdout and "domainbed: fetched" in done.stdout, \
        done.stdout + done.stderr
    assert (data_root / "mnist-npz" / "mnist.npz").read_bytes() == archive.read_bytes()
    assert (data_root / "domainbed" / "src" / "domainbed" / "algorithms.py").is_file()
    assert "mnist-npz: cached" in fmlbench(*args).stdout
