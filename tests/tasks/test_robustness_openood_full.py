"""robustness_openood_full: FML-bench's Robustness_openood spec, splits and FPR95, its smoke run offline, the
test's secret mixing order, its ID/OOD marks and the data cache out of agent code's reach, and its data fetch
failing closed."""

import json
import subprocess
import sys

import numpy as np
import pytest

from pytest_fmlbench.scoring.original import builtin_tasks
from pytest_fmlbench.spec import load_task
from pytest_fmlbench.taskkit import cifar, svhn
from pytest_fmlbench.taskkit import fixtures as generators

from conftest import REPO
from full_support import (Attack, FullTask, assert_fetch_fails_closed, assert_matches_original,
                          assert_missing_data_is_one_line, assert_the_shared_attack_reached_nothing,
                          assert_the_smoke_run_passed, attack_payload, data_root, needs_bwrap,
                          shared_smoke_attack_run)

TASK = FullTask("robustness_openood")
FULL, SPEC = TASK.folder, TASK.spec
SVHN_TEST_IMAGES = 26_032  # SVHN's published test-set size

# Runs when train.py imports algorithm.py, in every val and test run: it looks for the archives, SVHN, the
# harness's prepare.py, the test's ID/OOD marks and the cache's stamps, and turns leaked marks into perfect
# scores.
ATTACK = Attack("algorithm.py", "import torchvision.models as models", attack_payload(
    cache=("smoke/svhn-test-32x32/test_32x32.mat",), harness=("prepare.py",), private=("test_is_id.npy",),
    secrets=("cifar-10-python.tar.gz", "cifar-100-python.tar.gz", "test_32x32.mat", "test_is_id.npy",
             "val_counts.npy", "stamp.json"),
    leaked="test_is_id.npy", write='numpy.save(_out / "scores.npy", numpy.load(_leak).astype(float))'))
shared_run = shared_smoke_attack_run(TASK, ATTACK)


@pytest.fixture(scope="module")
def harness():
    """The harness's prepare and evaluate modules, imported as the harness runs them."""
    return TASK.harness_module("prepare"), TASK.harness_module("evaluate")


def test_the_spec_is_the_originals():
    assert_matches_original(SPEC)
    original = builtin_tasks()["Robustness_openood"]
    assert SPEC.editable == list(original.target_files) == ["algorithm.py", "split_config.json"]
    assert SPEC.constraints == []
    # the original's default split: about 3,000 of the 53,000 visible images for val
    assert json.loads((FULL / "workspace" / "split_config.json").read_text()) == {"val_ratio": 0.057, "val_seed": 42}
    assert [a.name for a in SPEC.data] == ["cifar-10-python", "cifar-100-python", "svhn-test-32x32"]
    # artefacts shared with other full tasks are declared identically (the cache holds one copy)
    for other in ("privacy_opacus", "data_efficiency_usb"):
        theirs = {a.name: a for a in load_task(REPO / "task_suites" / other / "full" / "task.yaml").spec.data}
        for artifact in SPEC.data:
            if artifact.name in theirs:
                assert artifact == theirs[artifact.name]


def test_the_splits_are_the_originals(harness):
    prepare, _ = harness
    visible, hidden = prepare.visible_and_hidden(10_000)
    # the original: RandomState(42).permutation(10000); its first int(0.3 * 10000) are visible, the rest hidden
    order = np.random.RandomState(42).permutation(10_000)
    assert visible.tolist() == order[:3000].tolist() and hidden.tolist() == order[3000:].tolist()
    assert prepare.svhn_subset(SVHN_TEST_IMAGES).tolist() == (
        np.random.RandomState(42).permutation(SVHN_TEST_IMAGES)[:5000].tolist())
    assert sorted(prepare.svhn_subset(40).tolist()) == list(range(40))  # a fixture smaller than 5,000: all of it


def _original_fpr95(is_id: np.ndarray, scores: np.ndarray) -> float:
    """The original's loop: down the scores until int(0.95 * n_ID) ID inputs are passed, counting OOD ones."""
    labels = is_id[np.argsort(-scores)]
    target, tp, fp = int(0.95 * is_id.sum()), 0, 0
    for label in labels:
        tp, fp = tp + label, fp + (1 - label)
        if tp >= target:
            break
    return fp / (len(is_id) - is_id.sum())


def test_fpr95_is_the_originals_and_ties_pass_together(harness):
    _, evaluate = harness
    rng = np.random.default_rng(0)
    for n_id, n_ood in ((300, 500), (7, 13), (1000, 5000)):
        is_id = np.r_[np.ones(n_id, dtype=np.int64), np.zeros(n_ood, dtype=np.int64)]
        scores = np.r_[rng.normal(1.0, 1.0, n_id), rng.normal(0.0, 1.0, n_ood)]  # no ties
        assert evaluate.fpr_at_95_tpr(is_id, scores) == pytest.approx(_original_fpr95(is_id, scores), abs=1e-12)
    # MSP saturates: 100 ID and 100 OOD inputs at probability 1.0 pass together whatever their order
    is_id = np.r_[np.ones(100, dtype=np.int64), np.zeros(100, dtype=np.int64)]
    scores = np.r_[np.ones(100), np.ones(100)]
    assert evaluate.fpr_at_95_tpr(is_id, scores) == 1.0
    assert evaluate.fpr_at_95_tpr(is_id[::-1].copy(), scores) == 1.0


def test_the_test_inputs_come_mixed_in_a_secret_order(tmp_path, harness):
    """Two test preparations: the same hidden CIFAR-10 and SVHN images, in different orders, marked only in PRIVATE."""
    fixtures = tmp_path / "data" / "smoke"
    cifar10 = fixtures / "cifar-10-python" / "cifar-10-python.tar.gz"
    generators.cifar10_python(cifar10)
    svhn.write_fixture(fixtures / "svhn-test-32x32" / "test_32x32.mat")
    prepare, _ = harness
    runs = []
    for name in ("a", "b"):
        out, private = tmp_path / name / "out", tmp_path / name / "private"
        done = subprocess.run([sys.executable, str(FULL / "harness" / "prepare.py"), "--split", "test", "--out",
                               str(out), "--private", str(private), "--data", str(fixtures), "--scale", "smoke"],
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        assert sorted(p.name for p in out.iterdir()) == ["test_images.npy"]
        runs.append((np.load(out / "test_images.npy"), np.load(private / "test_is_id.npy")))
    test_images, _ = cifar.read(cifar10, "cifar10", "test")
    expected_id = test_images[prepare.visible_and_hidden(len(test_images))[1]]
    expected_ood, _ = svhn.read(fixtures / "svhn-test-32x32" / "test_32x32.mat")
    for images, is_id in runs:
        assert len(images) == len(expected_id) + len(expected_ood)
        for got, want in ((images[is_id == 1], expected_id), (images[is_id == 0], expected_ood)):
            assert sorted(map(bytes, got)) == sorted(map(bytes, want))
    assert not np.array_equal(runs[0][1], runs[1][1])


def test_the_smoke_run_passes_offline(shared_run):
    assert_the_smoke_run_passed(TASK, shared_run)


@needs_bwrap
def test_agent_code_cannot_reach_the_data_cache_or_the_marks(shared_run):
    assert_the_shared_attack_reached_nothing(shared_run)


def test_missing_data_is_one_line_before_any_step(pytester, bench, data_root):
    assert_missing_data_is_one_line(TASK, pytester, bench, data_root, "cifar-10-python (CIFAR-10*; 170.5 MB)")


def test_fetch_fails_closed_on_a_wrong_checksum(pytester, shared_run, data_root):
    """SVHN served from a file:// source of the recorded size holding other bytes: refused, nothing kept."""
    assert_fetch_fails_closed(TASK, pytester, shared_run.fixtures, data_root, only=("svhn-test-32x32",), then_fetch=False)
