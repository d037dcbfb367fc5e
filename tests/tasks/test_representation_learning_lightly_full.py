"""representation_learning_lightly_full: FML-bench's Representation_Learning_lightly spec and splits, its smoke run
offline, the hidden labels and the data cache out of agent code's reach, and its data fetch failing closed."""

import json
import subprocess
import sys

import numpy as np

from pytest_fmlbench import evalkit
from pytest_fmlbench.spec import load_task
from pytest_fmlbench.taskkit import fixtures as generators

from conftest import REPO
from full_support import (Attack, FullTask, assert_fetch_fails_closed, assert_matches_original,
                          assert_missing_data_is_one_line, assert_the_shared_attack_reached_nothing,
                          assert_the_smoke_run_passed, attack_payload, data_root, needs_bwrap,
                          shared_smoke_attack_run)

TASK = FullTask("representation_learning_lightly")
FULL, SPEC = TASK.folder, TASK.spec

# Runs when train.py imports model.py, in every val and test run: it looks for the CIFAR archive, the visible
# and hidden labels the evaluator keeps and the cache's stamps, and turns leaked test labels into predictions.
ATTACK = Attack("model.py", "import copy", attack_payload(
    cache=("smoke/cifar-10-python/cifar-10-python.tar.gz",), harness=("prepare.py",),
    private=("visible_labels.npy", "test_labels.npy"),
    secrets=("cifar-10-python.tar.gz", "test_labels.npy", "stamp.json"),
    leaked="test_labels.npy", write='numpy.save(_out / "predictions.npy", numpy.load(_leak))'))
shared_run = shared_smoke_attack_run(TASK, ATTACK)


def _run(script: str, *args: str) -> None:
    done = subprocess.run([sys.executable, str(FULL / "harness" / script), *args], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr


def test_the_spec_is_the_originals():
    assert_matches_original(SPEC)
    assert SPEC.editable == ["model.py", "transform.py", "split_config.json"]  # the original's target files
    assert SPEC.constraints == [] and SPEC.upstream == []  # lightly comes from PyPI, pinned in pyproject
    assert json.loads((FULL / "workspace" / "split_config.json").read_text()) == {"val_ratio": 0.057, "val_seed": 42}
    # CIFAR-10 is declared exactly as the other full tasks declare it (the cache holds one copy)
    theirs = {a.name: a for a in load_task(REPO / "task_suites" / "privacy_opacus" / "full" / "task.yaml").spec.data}
    assert [a.name for a in SPEC.data] == ["cifar-10-python"] and SPEC.data[0] == theirs["cifar-10-python"]


def test_the_hidden_test_is_the_originals_per_class_cut():
    prepare = TASK.harness_module("prepare")
    labels = np.random.default_rng(3).permutation(np.repeat(np.arange(10), 1000))  # CIFAR-10's test set: 1,000 a class
    visible, hidden = prepare.visible_and_hidden(labels)
    # the original: one RandomState(42); per class in order, a permutation of its indices, the first 30% visible
    rng, expected_visible, expected_hidden = np.random.RandomState(42), [], []
    for c in range(10):
        shuffled = rng.permutation(np.where(labels == c)[0])
        expected_visible.extend(shuffled[:300])
        expected_hidden.extend(shuffled[300:])
    assert visible.tolist() == expected_visible and hidden.tolist() == expected_hidden
    assert (np.bincount(labels[visible], minlength=10) == 300).all() and len(hidden) == 7000
    assert sorted(visible.tolist() + hidden.tolist()) == list(range(10_000))


def test_the_evaluator_scores_the_val_part_in_train_pys_order(tmp_path):
    """Predictions equal to the val labels, cut from the workspace's pool as train.py cuts it, score 1.0 for any
    split_config; the test labels stay in PRIVATE."""
    data = tmp_path / "data"
    generators.cifar10_python(data / "cifar-10-python" / "cifar-10-python.tar.gz")
    workspace, private, out = tmp_path / "workspace", tmp_path / "private", tmp_path / "out"
    workspace.mkdir()
    _run("prepare.py", "--split", "val", "--workspace", str(workspace), "--private", str(private), "--out", str(out),
         "--data", str(data), "--scale", "smoke")
    labels = np.load(workspace / "data" / "visible_labels.npy")
    assert len(labels) == 200 + 10  # the fixture's 200 training images and 30% of each class of its 40 test images
    for ratio in (0.057, 0.3):
        (workspace / "split_config.json").write_text(json.dumps({"val_ratio": ratio, "val_seed": 7}))
        _, val_pos = evalkit.original_split_indices(len(labels), evalkit.OriginalSplitConfig(val_ratio=ratio, val_seed=7))
        out.mkdir(exist_ok=True)
        np.save(out / "predictions.npy", labels[val_pos])
        _run("evaluate.py", "--split", "val", "--workspace", str(workspace), "--out", str(out), "--private",
             str(private), "--result", str(tmp_path / "result.json"))
        result = json.loads((tmp_path / "result.json").read_text())
        assert result["datasets"]["cifar10_linear_probing"]["means"]["test_acc_mean"] == 1.0
        assert result["info"]["n_eval"] == int(ratio * len(labels))
    _run("prepare.py", "--split", "test", "--private", str(private), "--out", str(out), "--data", str(data),
         "--scale", "smoke")
    assert not (out / "test_labels.npy").exists() and len(np.load(private / "test_labels.npy")) == 30


def test_the_smoke_run_passes_offline(shared_run):
    _, run = assert_the_smoke_run_passed(TASK, shared_run)
    log = (run / "logs" / "final_val.log").read_text()
    assert "pre-training for 1 epochs" in log and "linear probe for 1 epochs" in log  # both of the original's stages


@needs_bwrap
def test_agent_code_cannot_reach_the_data_cache_or_the_labels(shared_run):
    assert_the_shared_attack_reached_nothing(shared_run)


def test_missing_data_is_one_line_before_any_step(pytester, bench, data_root):
    assert_missing_data_is_one_line(TASK, pytester, bench, data_root, "cifar-10-python (CIFAR-10*; 170.5 MB)")


def test_fetch_fails_closed_on_a_wrong_checksum(pytester, shared_run, data_root):
    """CIFAR-10 served from a file:// source of the recorded size holding other bytes: refused, nothing kept."""
    assert_fetch_fails_closed(TASK, pytester, shared_run.fixtures, data_root, then_fetch=False)
