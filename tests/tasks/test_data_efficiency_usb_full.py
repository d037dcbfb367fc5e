"""data_efficiency_usb_full: FML-bench's Data_Efficiency_usb spec and splits, its smoke run offline, the hidden
labels out of agent code's reach, and its data fetch failing closed."""

import numpy as np

from full_support import (Attack, FullTask, assert_fetch_fails_closed, assert_matches_original,
                          assert_missing_data_is_one_line, assert_the_shared_attack_reached_nothing,
                          assert_the_smoke_run_passed, attack_payload, data_root, needs_bwrap,
                          shared_smoke_attack_run)

TASK = FullTask("data_efficiency_usb")
SPEC = TASK.spec

# Runs when train.py imports algorithm.py, in every val and test run: it looks for the CIFAR-100 archive, the
# val and test labels and the cache's stamps, and turns leaked test labels into predictions.
ATTACK = Attack("algorithm.py", "import numpy as np", attack_payload(
    cache=("smoke/cifar-100-python/cifar-100-python.tar.gz",), private=("val_labels.npy", "test_labels.npy"),
    secrets=("cifar-100-python.tar.gz", "val_labels.npy", "test_labels.npy", "stamp.json"),
    leaked="test_labels.npy", write='numpy.save(_out / "predictions.npy", numpy.load(_leak))'))
shared_run = shared_smoke_attack_run(TASK, ATTACK)


def test_the_spec_is_the_originals():
    assert_matches_original(SPEC)
    assert SPEC.editable == ["algorithm.py"]  # the original's only target file: no editable split
    assert SPEC.constraints == []


def test_the_labelled_set_and_the_hidden_test_are_the_originals():
    prepare = TASK.harness_module("prepare")
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


def test_the_smoke_run_passes_offline(shared_run):
    assert_the_smoke_run_passed(TASK, shared_run)


@needs_bwrap
def test_agent_code_cannot_reach_the_data_cache_or_the_labels(shared_run):
    assert_the_shared_attack_reached_nothing(shared_run)


def test_missing_data_is_one_line_before_any_step(pytester, bench, data_root):
    assert_missing_data_is_one_line(TASK, pytester, bench, data_root, "cifar-100-python (CIFAR-100*; 169.0 MB)")


def test_fetch_fails_closed_on_a_wrong_checksum(pytester, shared_run, data_root):
    """CIFAR-100 served from a file:// source of the recorded size holding other bytes: refused, nothing kept."""
    assert_fetch_fails_closed(TASK, pytester, shared_run.fixtures, data_root, then_fetch=False)
