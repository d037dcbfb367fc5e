"""continual_learning_pycil_full: FML-bench's Continual_Learning_pycil spec and protocol, PyCIL's files in the
workspace, its smoke run offline, the hidden labels out of agent code's reach, one-line preflight, fetch
failing closed."""

import fnmatch
import json
import subprocess
import sys

import numpy as np
import pytest

from pytest_fmlbench.taskkit import pycil

from full_support import (Attack, FullTask, assert_edits_the_originals_checkout, assert_fetch_fails_closed,
                          assert_matches_original, assert_missing_data_is_one_line,
                          assert_the_shared_attack_reached_nothing, assert_the_smoke_run_passed,
                          assert_workspace_holds_the_checkout, attack_payload, data_root, needs_bwrap,
                          shared_smoke_attack_run)

TASK = FullTask("continual_learning_pycil")
SPEC = TASK.spec

# the original's config.json pins PyCIL by this abbreviated commit
ORIGINAL_PIN = "f3509b8"
# PyCIL's learners at that commit (models/*.py): all but iCaRL stay as PyCIL has them
PYCIL_MODELS = ("__init__ acil aper_finetune base beef_iso bic coil der dsal ewc fetril finetune foster gem icarl "
                "il2a lwf memo pa2s podnet replay rmm simplecil ssre tagfex wa").split()

# Runs when train.py imports PyCIL's models/icarl.py, in every val and test run: it looks for the CIFAR-100
# archive, PyCIL's checkout, the val and test labels and the cache's stamps, and turns leaked test labels into
# every session's labels.
ATTACK = Attack("models/icarl.py", "import logging", attack_payload(
    cache=("smoke/cifar-100-python/cifar-100-python.tar.gz", "smoke/pycil/src"), private=("test_labels.npy",),
    secrets=("cifar-100-python.tar.gz", "val_labels.npy", "test_labels.npy", "stamp.json"),
    leaked="test_labels.npy", write='[numpy.save(_out / f"session_{t}_{h}.npy", numpy.load(_leak)) '
                                    'for t in range(6) for h in ("cnn", "nme")]'))
shared_run = shared_smoke_attack_run(TASK, ATTACK)


def test_the_spec_is_the_originals():
    assert_matches_original(SPEC)
    repo = assert_edits_the_originals_checkout(SPEC)  # PyCIL's models/icarl.py, nothing else
    assert SPEC.constraints == [] and "split_config.json" not in SPEC.editable  # the original's split is fixed
    assert repo.commit.startswith(ORIGINAL_PIN) and repo.urls == ["https://github.com/LAMDA-CL/PyCIL.git"]


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
    harness = TASK.folder / "harness" / "evaluate.py"
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


def test_the_smoke_run_passes_offline_on_pycils_files(shared_run):
    data_root = shared_run.data_root
    _, run = assert_the_smoke_run_passed(TASK, shared_run)
    # the workspace holds the checkout's files (the smoke stand-in's), and the driver trained with them
    assert_workspace_holds_the_checkout(shared_run.attack, run, data_root / "smoke" / "pycil" / "src", (
        "models/icarl.py", "models/base.py", "utils/data_manager.py", "convs/cifar_resnet.py"))
    val_log = (run / "logs" / "step_0001_val.log").read_text()
    assert "iCaRL: init_epoch=1" in val_log and "session 5: classes 0-99 learnt" in val_log, val_log
    assert "session 5: test images labelled" in (run / "logs" / "final_test.log").read_text()


@needs_bwrap
def test_agent_code_cannot_reach_the_data_cache_or_the_labels(shared_run):
    assert_the_shared_attack_reached_nothing(shared_run)


def test_missing_data_is_one_line_before_any_step(pytester, bench, data_root):
    assert_missing_data_is_one_line(TASK, pytester, bench, data_root, "cifar-100-python (CIFAR-100*; 169.0 MB)")


def test_fetch_fails_closed_then_fetches_the_archive_and_pycil_at_its_commit(pytester, shared_run, data_root):
    """The archive, served from a file:// source holding other bytes, is refused and nothing is kept; with that
    source's own checksum declared it is fetched. PyCIL comes from a fixture repository: a commit it does not
    hold is refused, its own commit is checked out."""
    assert_fetch_fails_closed(TASK, pytester, shared_run.fixtures, data_root)
