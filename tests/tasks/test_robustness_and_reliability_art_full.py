"""robustness_and_reliability_art_full: FML-bench's Robustness_and_Reliability_art spec, its poisoning protocol,
its smoke run offline, the hidden test and the poison marks out of reach, and its data fetch failing closed."""

import json
from pathlib import Path

import numpy as np
import pytest

from pytest_fmlbench.scoring.original import builtin_tasks

from full_support import (Attack, FullTask, assert_fetch_fails_closed, assert_matches_original,
                          assert_missing_data_is_one_line, assert_the_shared_attack_reached_nothing,
                          assert_the_smoke_run_passed, attack_payload, data_root, needs_bwrap,
                          shared_smoke_attack_run)

TASK = FullTask("robustness_and_reliability_art")
FULL, SPEC = TASK.folder, TASK.spec
# MNIST's published class counts (test set): they set the sizes of the original's splits
MNIST_TEST_COUNTS = [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]

# Runs when train.py imports model.py, in every val and test run: it looks for MNIST, the trigger code in the
# harness, the poison marks, the hidden labels and the cache's stamps, and turns leaked test labels into
# predictions.
ATTACK = Attack("model.py", "import torch.nn as nn", attack_payload(
    cache=("smoke/mnist/mnist.npz",), harness=("poisoned_mnist.py",), private=("pool0_is_poison.npy",),
    secrets=("mnist.npz", "pool0_is_poison.npy", "test0_is_poison.npy", "test0_y.npy", "poisoned_mnist.py",
             "stamp.json"),
    leaked="test0_y.npy", write='[numpy.save(_out / f"predictions{i}.npy", '
                                'numpy.load(_Path(_leak).parent / f"test{i}_y.npy")) for i in range(5)]'))
shared_run = shared_smoke_attack_run(TASK, ATTACK)


@pytest.fixture(scope="module")
def harness_modules():
    """The harness's poisoning and preparation modules, imported as prepare.py imports them."""
    return TASK.harness_module("poisoned_mnist"), TASK.harness_module("prepare")


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


def test_the_smoke_run_passes_offline(shared_run):
    assert_the_smoke_run_passed(TASK, shared_run)


@needs_bwrap
def test_agent_code_cannot_reach_the_data_the_marks_or_the_triggers(shared_run):
    assert_the_shared_attack_reached_nothing(shared_run)


def test_missing_data_is_one_line_before_any_step(pytester, bench, data_root):
    assert_missing_data_is_one_line(TASK, pytester, bench, data_root, "mnist (MNIST, Keras's mnist.npz*; 11.5 MB)")


def test_fetch_fails_closed_on_a_wrong_checksum(pytester, shared_run, data_root):
    """MNIST served from a file:// source of the recorded size holding other bytes: refused, nothing kept."""
    assert_fetch_fails_closed(TASK, pytester, shared_run.fixtures, data_root, then_fetch=False)
