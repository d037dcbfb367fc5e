"""continual_learning_continual_learning_full: FML-bench's Continual_Learning_continual_learning spec and protocol,
the repository's files in the workspace, its smoke run offline, the hidden labels out of agent code's reach,
one-line preflight, fetch failing closed."""

import json
import shutil
import subprocess
import sys

import numpy as np
import pytest

from pytest_fmlbench.taskkit import mnist, splitmnist
from pytest_fmlbench.workspace import protected_paths

from conftest import REPO

from full_support import (Attack, FullTask, assert_edits_the_originals_checkout, assert_fetch_fails_closed,
                          assert_matches_original, assert_missing_data_is_one_line,
                          assert_the_shared_attack_reached_nothing, assert_the_smoke_run_passed,
                          assert_workspace_holds_the_checkout, attack_payload, data_root, needs_bwrap,
                          shared_smoke_attack_run)

TASK = FullTask("continual_learning_continual_learning")
SPEC = TASK.spec
STANDIN = REPO / "pytest_fmlbench" / "taskkit" / "standins" / "continual_learning"

# the original's config.json pins the repository by this commit
ORIGINAL_PIN = "7cb0ef5a85c928c3cbae3f876f71640251f9dc79"
# the repository's files at that commit under the folders the workspace receives
UPSTREAM_FILES = """data/__init__.py data/available.py data/datastream.py data/labelstream.py data/load.py
data/manipulate.py eval/__init__.py eval/callbacks.py eval/evaluate.py models/__init__.py models/cl/__init__.py
models/cl/continual_learner.py models/cl/fromp_optimizer.py models/cl/memory_buffer.py
models/cl/memory_buffer_stream.py models/classifier.py models/classifier_stream.py models/cond_vae.py
models/conv/__init__.py models/conv/layers.py models/conv/nets.py models/define_models.py models/fc/__init__.py
models/fc/excitability_modules.py models/fc/layers.py models/fc/nets.py models/feature_extractor.py
models/generative_classifier.py models/separate_classifiers.py models/utils/__init__.py
models/utils/loss_functions.py models/utils/modules.py models/utils/ncl.py models/vae.py params/__init__.py
params/options.py params/param_stamp.py params/param_values.py train/__init__.py train/train_standard.py
train/train_stream.py train/train_task_based.py utils.py visual/__init__.py visual/visual_plt.py
visual/visual_visdom.py""".split()

# Runs when train.py imports the repository's continual_learner.py, in every val and test run: it looks for the
# MNIST archive, the repository's checkout, the val and test labels and the cache's stamps, and turns leaked test
# labels into the predictions.
ATTACK = Attack("models/cl/continual_learner.py", "import abc", attack_payload(
    cache=("smoke/mnist-npz/mnist.npz", "smoke/continual-learning/src"), private=("test_labels.npy",),
    secrets=("mnist.npz", "val_labels.npy", "test_labels.npy", "stamp.json"),
    leaked="test_labels.npy", write='numpy.save(_out / "predictions.npy", numpy.load(_leak))'))
shared_run = shared_smoke_attack_run(TASK, ATTACK)


def test_the_spec_is_the_originals():
    assert_matches_original(SPEC)
    repo = assert_edits_the_originals_checkout(SPEC)  # the original's three target files, nothing else
    assert SPEC.constraints == [] and "split_config.json" not in SPEC.editable  # the original's split is fixed
    assert repo.commit == ORIGINAL_PIN and repo.urls == ["https://github.com/GMvandeVen/continual-learning.git"]


def test_every_file_of_the_repository_but_the_three_targets_is_protected(tmp_path):
    for rel in UPSTREAM_FILES:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("")
    # what the sandbox binds read-only over the workspace: the protected globs' matches
    bound = protected_paths(tmp_path, SPEC.protected)
    unprotected = [rel for rel in UPSTREAM_FILES
                   if not any(p == tmp_path / rel or p in (tmp_path / rel).parents for p in bound)]
    (copy,) = SPEC.upstream
    assert all(copy.covers(rel) for rel in UPSTREAM_FILES)
    assert sorted(unprotected) == sorted(SPEC.editable)


def test_the_contexts_and_the_val_test_cut_are_the_originals():
    labels = np.random.default_rng(3).integers(0, 10, size=1000)
    # the original: per context, a SubDataset of the test set (its digits, in test-set order), then
    # RandomState(42 + context).permutation, the first int(0.3 n) for val
    val, test = [], []
    for context in range(5):
        members = [i for i, y in enumerate(labels) if y in (2 * context, 2 * context + 1)]
        order = np.random.RandomState(42 + context).permutation(len(members))
        cut = int(0.3 * len(members))
        val += [members[i] for i in order[:cut]]
        test += [members[i] for i in order[cut:]]
    got_val, got_test = splitmnist.val_test_split(labels)
    assert got_val.tolist() == val and got_test.tolist() == test
    assert splitmnist.context_of(np.arange(10)).tolist() == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]


def test_average_acc_is_the_mean_of_the_five_contexts_accuracies():
    labels = np.array([0, 1, 1, 1, 2, 3, 4, 5, 6, 7, 8, 9])
    predictions = labels.copy()
    predictions[:3] = 9  # context 0: one right of four
    assert splitmnist.context_accuracies(predictions, labels) == [0.25, 1.0, 1.0, 1.0, 1.0]
    # not the accuracy over the pooled images (9 of 12)
    assert splitmnist.average_accuracy(predictions, labels) == pytest.approx(0.85)


def harness(script: str, *args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(TASK.folder / "harness" / script), *map(str, args)],
                          capture_output=True, text=True)


def test_prepare_hands_over_the_scored_digits_without_their_context(tmp_path):
    mnist.write_fixture(tmp_path / "cache" / "mnist-npz" / "mnist.npz")
    workspace, private, out = tmp_path / "workspace", tmp_path / "private", tmp_path / "out"
    for split in ("val", "test"):
        done = harness("prepare.py", "--split", split, "--workspace", workspace, "--private", private, "--out", out,
                       "--data", tmp_path / "cache")
        assert done.returncode == 0, done.stderr
    (train_x, train_y), (test_x, test_y) = mnist.read(tmp_path / "cache" / "mnist-npz" / "mnist.npz")
    assert (np.load(workspace / "data" / "train_images.npy") == train_x).all()
    assert (np.load(workspace / "data" / "train_labels.npy") == train_y).all()
    val_idx, test_idx = splitmnist.val_test_split(test_y)
    for split, idx, images in (("val", val_idx, workspace / "data" / "val_images.npy"),
                               ("test", test_idx, out / "test_images.npy")):
        labels, shown = np.load(private / f"{split}_labels.npy"), np.load(images)
        # the original's images, with their labels beside them in the harness's private folder
        assert sorted(labels.tolist()) == sorted(test_y[idx].tolist())
        assert all(any((image == test_x[i]).all() and label == test_y[i] for i in idx)
                   for image, label in zip(shown, labels))
        # in an order that does not run context after context
        contexts = splitmnist.context_of(labels)
        assert (np.diff(contexts) < 0).any()
    assert not (workspace / "data" / "val_labels.npy").exists() and not (out / "test_labels.npy").exists()


def test_the_evaluator_scores_each_context_and_refuses_a_short_answer(tmp_path):
    labels = np.repeat(np.arange(10), 3)
    out, private = tmp_path / "out", tmp_path / "private"
    out.mkdir()
    private.mkdir()
    np.save(private / "val_labels.npy", labels)
    predictions = labels.copy()
    predictions[labels < 2] = 5  # context 0 all wrong
    np.save(out / "predictions.npy", predictions)
    done = harness("evaluate.py", "--split", "val", "--out", out, "--private", private, "--result", tmp_path / "r.json")
    assert done.returncode == 0, done.stderr
    result = json.loads((tmp_path / "r.json").read_text())
    assert result["datasets"]["splitMNIST_scenario_class"]["means"] == {"average_acc_mean": 0.8}
    assert result["info"]["context_accuracies"] == [0.0, 1.0, 1.0, 1.0, 1.0]
    np.save(out / "predictions.npy", predictions[:10])
    done = harness("evaluate.py", "--split", "val", "--out", out, "--private", private, "--result", tmp_path / "r.json")
    assert done.returncode == 1 and done.stderr.strip() == \
        "evaluate.py: predictions.npy has shape (10,), expected (30,)", done.stderr


def test_train_py_refuses_options_that_change_the_protocol(tmp_path):
    """param_values.py may choose the method, not the experiment: two contexts instead of five is refused."""
    workspace = tmp_path / "workspace"
    shutil.copytree(STANDIN, workspace, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(TASK.folder / "workspace" / "train.py", workspace / "train.py")
    values = workspace / "params" / "param_values.py"
    values.write_text(values.read_text().replace("args.contexts = 5 if", "args.contexts = 2 if"))
    mnist.write_fixture(tmp_path / "cache" / "mnist-npz" / "mnist.npz")
    done = harness("prepare.py", "--split", "val", "--workspace", workspace, "--private", tmp_path / "private",
                   "--data", tmp_path / "cache")
    assert done.returncode == 0, done.stderr
    done = subprocess.run([sys.executable, "train.py", "--split", "val", "--out", str(tmp_path / "out"),
                           "--scale", "smoke"], cwd=workspace, capture_output=True, text=True)
    assert done.returncode == 1 and done.stderr.strip().splitlines()[-1] == (
        "train.py: the protocol is {'experiment': 'splitMNIST', 'scenario': 'class', 'contexts': 5}; "
        "params/param_values.py set {'contexts': 2}"), done.stderr


def test_the_smoke_run_passes_offline_on_the_repositorys_files(shared_run):
    data_root = shared_run.data_root
    _, run = assert_the_smoke_run_passed(TASK, shared_run)
    # the workspace holds the checkout's files (the smoke stand-in's), and the driver trained with them
    assert_workspace_holds_the_checkout(shared_run.attack, run, data_root / "smoke" / "continual-learning" / "src", (
        *SPEC.editable, "params/options.py", "data/load.py", "models/classifier.py"))
    val_log = (run / "logs" / "step_0001_val.log").read_text()
    assert "iters per context: 5, batch: 32" in val_log and "Context: 5/5" in val_log, val_log
    assert "60 val images labelled" in val_log, val_log
    test_log = (run / "logs" / "final_test.log").read_text()
    # the test run restores the val run's model: it labels, it does not train
    assert "140 test images labelled" in test_log and "Total training time" not in test_log, test_log


@needs_bwrap
def test_agent_code_cannot_reach_the_data_cache_or_the_labels(shared_run):
    assert_the_shared_attack_reached_nothing(shared_run)


def test_missing_data_is_one_line_before_any_step(pytester, bench, data_root):
    assert_missing_data_is_one_line(TASK, pytester, bench, data_root, "mnist-npz (MNIST*; 11.5 MB)")


def test_fetch_fails_closed_then_fetches_the_archive_and_the_repository_at_its_commit(pytester, shared_run, data_root):
    """The archive, served from a file:// source holding other bytes, is refused and nothing is kept; with that
    source's own checksum declared it is fetched. The repository comes from a fixture repository: a commit it does
    not hold is refused, its own commit is checked out."""
    assert_fetch_fails_closed(TASK, pytester, shared_run.fixtures, data_root)
