"""representation_learning_solo_learn_full: FML-bench's Representation_Learning_solo_learn spec, splits and
baseline loss, its smoke run offline, the hidden labels and the data cache out of agent code's reach, and its
data fetch failing closed."""

import importlib.util
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

TASK = FullTask("representation_learning_solo_learn")
FULL, SPEC = TASK.folder, TASK.spec

# Runs when train.py imports algorithm.py, in every val and test run: it looks for the CIFAR-100 archive, the
# labels the evaluator keeps and the cache's stamps, and turns leaked test labels into predictions.
ATTACK = Attack("algorithm.py", "import torch.nn as nn", attack_payload(
    cache=("smoke/cifar-100-python/cifar-100-python.tar.gz",), harness=("prepare.py",),
    private=("visible_labels.npy", "test_labels.npy"),
    secrets=("cifar-100-python.tar.gz", "test_labels.npy", "stamp.json"),
    leaked="test_labels.npy", write='numpy.save(_out / "predictions.npy", numpy.load(_leak))'))
shared_run = shared_smoke_attack_run(TASK, ATTACK)


def _run(script: str, *args: str) -> None:
    done = subprocess.run([sys.executable, str(FULL / "harness" / script), *args], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr


def test_the_spec_is_the_originals():
    assert_matches_original(SPEC)
    assert SPEC.editable == ["algorithm.py", "split_config.json"]  # the original's target files
    assert SPEC.constraints == [] and SPEC.upstream == []  # the original's script imports nothing of solo-learn
    assert json.loads((FULL / "workspace" / "split_config.json").read_text()) == {"val_ratio": 0.057, "val_seed": 42}
    theirs = {a.name: a for a in load_task(REPO / "task_suites" / "data_efficiency_usb" / "full" / "task.yaml").spec.data}
    assert [a.name for a in SPEC.data] == ["cifar-100-python"] and SPEC.data[0] == theirs["cifar-100-python"]


def test_the_baseline_is_the_originals_barlow_twins():
    import torch

    spec = importlib.util.spec_from_file_location("solo_algorithm", FULL / "workspace" / "algorithm.py")
    algorithm = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(algorithm)
    assert algorithm.get_training_config() == {
        "pretrain_epochs": 130, "linear_eval_epochs": 100, "batch_size": 512, "lr": 0.4, "weight_decay": 1e-4,
        "lambda_param": 5e-3, "linear_lr": 0.1, "linear_batch_size": 256}
    model = algorithm.get_model()
    features, projections = model(torch.zeros(2, 3, 32, 32))
    assert model.backbone_dim == 512 and features.shape == (2, 512) and projections.shape == (2, 2048)
    # the original's loss: batch-normalised views, c = z1'z2 / n, its off-diagonal read through a strided view
    loss = algorithm.BarlowTwinsLoss(lambda_param=5e-3, embedding_dim=16)
    z1, z2 = torch.randn(8, 16, generator=torch.Generator().manual_seed(0)), torch.randn(8, 16)
    c = loss.bn(z1).T @ loss.bn(z2) / 8
    off_diagonal = c.flatten()[:-1].view(15, 17)[:, 1:].flatten().pow(2).sum()
    expected = (1 - c.diagonal()).pow(2).sum() + 5e-3 * off_diagonal
    assert torch.allclose(loss(z1, z2), expected)


def test_the_hidden_test_and_the_evaluators_val_part_are_the_originals(tmp_path):
    prepare = TASK.harness_module("prepare")
    visible, hidden = prepare.visible_and_hidden(10_000)
    # the original: RandomState(42).permutation(10000); its first int(0.3 * 10000) are visible, the rest hidden
    order = np.random.RandomState(42).permutation(10_000)
    assert visible.tolist() == order[:3000].tolist() and hidden.tolist() == order[3000:].tolist()
    # predictions equal to the val labels, cut from the workspace's pool as train.py cuts it, score 1.0
    data = tmp_path / "data"
    generators.cifar100_python(data / "cifar-100-python" / "cifar-100-python.tar.gz")
    workspace, private, out = tmp_path / "workspace", tmp_path / "private", tmp_path / "out"
    workspace.mkdir()
    _run("prepare.py", "--split", "val", "--workspace", str(workspace), "--private", str(private), "--out", str(out),
         "--data", str(data), "--scale", "smoke")
    labels = np.load(workspace / "data" / "visible_labels.npy")
    assert len(labels) == 1000 + 120  # the fixture's 1,000 training images and 30% of its 400 test images
    (workspace / "split_config.json").write_text(json.dumps({"val_ratio": 0.2, "val_seed": 5}))
    _, val_pos = evalkit.original_split_indices(len(labels), evalkit.OriginalSplitConfig(val_ratio=0.2, val_seed=5))
    out.mkdir()
    np.save(out / "predictions.npy", labels[val_pos])
    _run("evaluate.py", "--split", "val", "--workspace", str(workspace), "--out", str(out), "--private", str(private),
         "--result", str(tmp_path / "result.json"))
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["datasets"]["cifar100_ssl"]["means"]["linear_eval_acc_mean"] == 1.0
    assert result["info"]["n_eval"] == 224


def test_the_smoke_run_passes_offline(shared_run):
    _, run = assert_the_smoke_run_passed(TASK, shared_run)
    val, test = ((run / "logs" / name).read_text() for name in ("final_val.log", "final_test.log"))
    assert "pre-training for 1 epochs" in val and "(seed 100)" in val
    assert "pre-training" not in test and "(seed 200)" in test  # the test run probes afresh, pre-trains nothing


@needs_bwrap
def test_agent_code_cannot_reach_the_data_cache_or_the_labels(shared_run):
    assert_the_shared_attack_reached_nothing(shared_run)


def test_missing_data_is_one_line_before_any_step(pytester, bench, data_root):
    assert_missing_data_is_one_line(TASK, pytester, bench, data_root, "cifar-100-python (CIFAR-100*; 169.0 MB)")


def test_fetch_fails_closed_on_a_wrong_checksum(pytester, shared_run, data_root):
    """CIFAR-100 served from a file:// source of the recorded size holding other bytes: refused, nothing kept."""
    assert_fetch_fails_closed(TASK, pytester, shared_run.fixtures, data_root, then_fetch=False)
