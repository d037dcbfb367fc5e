"""continual_learning_pycil_full: FML-bench's Continual_Learning_pycil spec and protocol, PyCIL's files in the
workspace, its smoke run offline, the hidden labels out of agent code's reach, one-line preflight, fetch
failing closed."""

import fnmatch
import json
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
import yaml

from pytest_fmlbench.scoring.original import builtin_tasks
from pytest_fmlbench.spec import load_task
from pytest_fmlbench.taskkit import pycil

from conftest import REPO
from full_support import assert_matches_original, fmlbench, load_full_record, smoke_project

SMALL_ID, TASK_ID = "continual_learning_pycil", "continual_learning_pycil_full"
SPEC = load_task(REPO / "task_suites" / SMALL_ID / "full" / "task.yaml").spec

# the original's config.json pins PyCIL by this abbreviated commit
ORIGINAL_PIN = "f3509b8"
# PyCIL's learners at that commit (models/*.py): all but iCaRL stay as PyCIL has them
PYCIL_MODELS = ("__init__ acil aper_finetune base beef_iso bic coil der dsal ewc fetril finetune foster gem icarl "
                "il2a lwf memo pa2s podnet replay rmm simplecil ssre tagfex wa").split()

# Runs when train.py imports PyCIL's models/icarl.py, in every val and test run. It knows where the harness
# keeps the data cache (the test tells it, through a variable the sandbox lets through) and looks for the
# CIFAR-100 archive, the val and test labels and the cache's own variable; it reports what it could read, and
# turns leaked test labels into every session's labels.
PAYLOAD = r'''
import atexit, json, os, sys
from pathlib import Path
_found = []
_cache = Path(os.environ.get("FMLBENCH_EXPERIMENT_CACHE", "/nonexistent-cache"))
if os.environ.get("FMLBENCH_DATA"):
    _found.append("env:FMLBENCH_DATA")
for _path in [_cache, _cache / "smoke" / "cifar-100-python" / "cifar-100-python.tar.gz", _cache / "smoke" / "pycil" / "src",
              Path.cwd().parent / "private", Path.cwd().parent / "private" / "test_labels.npy"]:
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
    atexit.register(lambda: [numpy.save(_out / f"session_{t}_{h}.npy", numpy.load(_leak))
                             for t in range(6) for h in ("cnn", "nme")])
'''

ATTACK_AGENT = f"""
from pytest_fmlbench import Agent, SearchReplace

class MyAgent(Agent):
    def run(self, session):
        edit = session.edit([SearchReplace("models/icarl.py", "import logging\\n", "import logging\\n" + {PAYLOAD!r})])
        assert edit.applied, edit.error
        session.run_step("improve", edit=edit)
"""


def test_the_spec_is_the_originals():
    assert_matches_original(SPEC)
    facts = builtin_tasks()[SPEC.original.task]
    assert tuple(SPEC.editable) == facts.target_files  # PyCIL's models/icarl.py, nothing else
    assert SPEC.constraints == [] and "split_config.json" not in SPEC.editable  # the original's split is fixed
    (repo,) = [a for a in SPEC.data if a.kind == "git"]
    assert repo.commit == SPEC.original.pinned_commit and repo.commit.startswith(ORIGINAL_PIN)
    assert repo.urls == ["https://github.com/LAMDA-CL/PyCIL.git"]
    (copy,) = SPEC.upstream
    assert copy.artifact == repo.name and all(copy.covers(path) for path in SPEC.editable)


def test_every_pycil_file_but_icarl_is_protected():
    def protected(path: str) -> bool:
        return any(fnmatch.fnmatch(path, pattern) or path.startswith(pattern.removesuffix("**"))
                   for pattern in SPEC.protected)

    assert [name for name in PYCIL_MODELS if not protected(f"models/{name}.py")] == ["icarl"]
    assert protected("utils/data_manager.py") and protected("convs/cifar_resnet.py") and protected("algorithm.py")


def test_the_class_order_sessions_and_split_are_the_originals():
    # PyCIL's DataManager: np.random.seed(1993), then a permutation of the 100 classes; labels become positions
    np.random.seed(1993)
    order = np.random.permutation(100).tolist()
    assert pycil.class_order().tolist() == order
    labels = np.repeat(np.arange(100), 100)  # CIFAR-100's test set: 100 images per class
    renumbered = pycil.renumber(labels, pycil.class_order())
    assert renumbered.tolist() == [order.index(y) for y in labels]
    assert pycil.session_sizes() == [50, 10, 10, 10, 10, 10]
    # the original's split_cifar100_test on the renumbered labels: one RandomState(42) over the classes in order
    rng = np.random.RandomState(42)
    val, test = [], []
    for c in range(100):
        shuffled = rng.permutation(np.where(renumbered == c)[0])
        val.extend(shuffled[:30])
        test.extend(shuffled[30:])
    got_val, got_test = pycil.val_test_split(renumbered)
    assert got_val.tolist() == val and got_test.tolist() == test and len(val) == 3000 and len(test) == 7000


def test_each_session_is_scored_on_the_classes_seen_so_far_with_pycils_rounding():
    labels = np.array([0, 1, 49, 50, 59, 60, 99])
    sizes = pycil.session_sizes()
    # right on every image except label 1; wrong answers on classes not yet seen do not count
    predictions = [np.where(labels == 1, 0, labels) for _ in sizes]
    curve = pycil.session_accuracies(predictions, labels, sizes)
    assert curve == [66.67, 80.0, 83.33, 83.33, 83.33, 85.71]
    assert pycil.average_incremental_accuracy(curve) == pytest.approx(sum(curve) / 600)
    # the original's baseline: six two-decimal percentages averaged, then divided by 100
    assert round(SPEC.baseline.val * 600, 6) == round(SPEC.baseline.val * 600, 2)


def evaluate(tmp_path, sessions: dict[str, list[np.ndarray]], labels: np.ndarray) -> subprocess.CompletedProcess:
    out, private = tmp_path / "out", tmp_path / "private"
    out.mkdir(parents=True)
    private.mkdir()
    np.save(private / "val_labels.npy", labels)
    for head, predictions in sessions.items():
        for t, pred in enumerate(predictions):
            np.save(out / f"session_{t}_{head}.npy", pred)
    harness = REPO / "task_suites" / SMALL_ID / "full" / "harness" / "evaluate.py"
    return subprocess.run([sys.executable, str(harness), "--split", "val", "--out", str(out), "--private",
                           str(private), "--result", str(tmp_path / "result.json")], capture_output=True, text=True)


def test_the_evaluator_reads_nme_labels_when_every_session_has_them_else_the_networks(tmp_path):
    labels = np.arange(100)
    right, wrong = labels.copy(), (labels + 1) % 100
    done = evaluate(tmp_path / "both", {"cnn": [wrong] * 6, "nme": [right] * 6}, labels)
    assert done.returncode == 0, done.stderr
    result = json.loads((tmp_path / "both" / "result.json").read_text())
    means = result["datasets"]["cifar100_incremental"]["means"]
    assert means == {"avg_incremental_acc_mean": 1.0, "avg_acc_cnn_mean": 0.0, "avg_acc_nme_mean": 1.0}
    # one session without NME labels: the network's labels are the metric
    assert result["info"]["classifier"] == "nme"
    done = evaluate(tmp_path / "some", {"cnn": [right] * 6, "nme": [wrong] * 5}, labels)
    result = json.loads((tmp_path / "some" / "result.json").read_text())
    assert done.returncode == 0 and result["info"]["classifier"] == "cnn"
    assert result["datasets"]["cifar100_incremental"]["means"]["avg_incremental_acc_mean"] == 1.0
    done = evaluate(tmp_path / "short", {"cnn": [right[:50]] * 6}, labels)
    assert done.returncode == 1 and done.stderr.strip() == \
        "evaluate.py: session_0_cnn.npy has shape (50,), expected (100,)", done.stderr


@pytest.fixture
def data_root(tmp_path, monkeypatch):
    root = tmp_path / "fmlbench-data"
    monkeypatch.setenv("FMLBENCH_DATA", str(root))
    return root


def test_the_smoke_run_passes_offline_on_pycils_files(pytester, bench, data_root):
    smoke_project(pytester, SMALL_ID, data_root)
    bench("--agent=baseline", "--steps=1", "-m", "full", "--scale=smoke", "task_suites").assert_outcomes(passed=1)
    record = load_full_record(pytester.path, TASK_ID)
    assert record["scale"] == "smoke" and record["integrity"] == "ok" and record["status"] == "finished"
    assert record["valid_steps"] == 1 and 0 <= record["test_metric"] <= 1
    run = next((pytester.path / "reports" / "fmlbench" / "runs" / TASK_ID).glob("*"))
    # the workspace holds the checkout's files (the smoke stand-in's), and the driver trained with them
    checkout = data_root / "smoke" / "pycil" / "src"
    for rel in ("models/icarl.py", "models/base.py", "utils/data_manager.py", "convs/cifar_resnet.py"):
        assert (run / "search" / "workspace" / rel).read_bytes() == (checkout / rel).read_bytes()
    val_log = (run / "logs" / "step_0001_val.log").read_text()
    assert "iCaRL: init_epoch=1" in val_log and "session 5: classes 0-99 learnt" in val_log, val_log
    assert "session 5: test images labelled" in (run / "logs" / "final_test.log").read_text()


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
    assert not (pytester.path / "reports" / "fmlbench" / "runs" / TASK_ID).exists()  # no step, no record


def test_fetch_fails_closed_then_fetches_the_archive_and_pycil_at_its_commit(pytester, tmp_path, data_root):
    """The archive, served from a file:// source holding other bytes, is refused and nothing is kept; with that
    source's own checksum declared it is fetched. PyCIL comes from a fixture repository: a commit it does not
    hold is refused, its own commit is checked out."""
    full = smoke_project(pytester, SMALL_ID, tmp_path / "fixtures")
    fixtures = tmp_path / "fixtures" / "smoke"
    archive = fixtures / "cifar-100-python" / "cifar-100-python.tar.gz"
    spec = yaml.safe_load((full / "task.yaml").read_text())
    archive_spec, repo_spec = spec["data"]
    archive_spec.update(urls=[archive.as_uri()], size=archive.stat().st_size)  # the recorded checksum, other bytes
    repo_spec.update(urls=[(fixtures / "pycil" / "src").as_uri()])  # the pinned commit is not in it
    (full / "task.yaml").write_text(yaml.safe_dump(spec))
    args = ("data", "fetch", "-k", TASK_ID, "--suite", str(pytester.path / "task_suites"))
    done = fmlbench(*args)
    assert done.returncode == 1
    assert re.search(r"cifar-100-python: failed: cifar-100-python: not fetched, nothing kept: .*expected "
                     + SPEC.data[0].sha256, done.stdout), done.stdout
    assert re.search(r"pycil: failed: .*" + SPEC.data[1].commit, done.stdout), done.stdout
    assert not (data_root / "cifar-100-python" / "cifar-100-python.tar.gz").exists()
    assert not (data_root / "pycil" / "src").exists()
    for artifact in (archive_spec, repo_spec):
        stamp = json.loads((fixtures / artifact["name"] / "stamp.json").read_text())
        artifact.update({key: stamp[key] for key in ("sha256", "size", "commit") if key in stamp})
    (full / "task.yaml").write_text(yaml.safe_dump(spec))
    done = fmlbench(*args)
    assert done.returncode == 0 and "cifar-100-python: fetched" in done.stdout and "pycil: fetched" in done.stdout, \
        done.stdout + done.stderr
    assert (data_root / "cifar-100-python" / "cifar-100-python.tar.gz").read_bytes() == archive.read_bytes()
    assert (data_root / "pycil" / "src" / "models" / "icarl.py").is_file()
    assert "cifar-100-python: cached" in fmlbench(*args).stdout
