"""generalization_domainbed: the baseline reproduces task.yaml, the held-out environment stays out of reach, and
its validation part (version 2: DomainBed's test-domain validation) shares no image with its test part."""

import subprocess
import sys

import numpy as np
from small_support import (SmallTask, assert_the_baseline_reproduced, assert_the_shared_attack_reached_nothing,
                           needs_bwrap, shared_attack_run)

TASK = SmallTask("generalization_domainbed")


# The held-out environment's labels (both parts), and the harness that builds it (its seed would rebuild them).
shared_run = shared_attack_run(
    TASK, editable="algorithms.py", anchor="import networks",
    private=("val_y.npy", "test_y.npy"), harness=("colored_digits.py", "layout.py"),
    secrets=("val_y.npy", "test_y.npy", "colored_digits.py", "layout.py", "prepare.py", "evaluate.py"))


def test_baseline_reproduces_the_declared_values(shared_run):
    assert_the_baseline_reproduced(TASK, shared_run)


@needs_bwrap
def test_the_held_out_environment_is_out_of_reach(shared_run):
    assert_the_shared_attack_reached_nothing(shared_run)


def test_validation_and_test_are_disjoint_parts_of_the_held_out_environment(tmp_path):
    workspace, private = tmp_path / "workspace", tmp_path / "private"
    for split in ("val", "test"):
        done = subprocess.run([sys.executable, str(TASK.folder / "harness" / "prepare.py"), "--split", split,
                               "--workspace", str(workspace), "--out", str(tmp_path / "out"),
                               "--private", str(private)], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
    data = workspace / "data"
    # the workspace holds the held-out environment's validation images, never their labels
    assert sorted(p.name for p in data.glob("*_y.npy")) == ["env0_y.npy", "env1_y.npy"]
    val_X, test_X = np.load(data / "val_X.npy"), np.load(tmp_path / "out" / "test_X.npy")
    val_y, test_y = np.load(private / "val_y.npy"), np.load(private / "test_y.npy")
    assert (len(val_X), len(test_X)) == (len(val_y), len(test_y))
    assert round(len(val_X) / (len(val_X) + len(test_X)), 2) == 0.3  # the original's holdout_fraction
    # all coloured copies of a digit on one side: no digit's strokes in both parts, whatever their colour
    strokes = {split: {image.tobytes() for image in X.sum(axis=1)} for split, X in (("val", val_X), ("test", test_X))}
    assert not strokes["val"] & strokes["test"]
    # environment 2 reverses the training environments' colour: it agrees with the label 10% of the time
    colour = np.concatenate([val_X, test_X]).reshape(-1, 2, 64).sum(axis=2).argmax(axis=1)
    assert abs(np.mean(colour == np.concatenate([val_y, test_y])) - 0.1) < 0.02
