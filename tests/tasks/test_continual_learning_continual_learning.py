"""continual_learning_continual_learning: the baseline reproduces task.yaml, and the method's code cannot
reach the hidden test labels, the harness (with the test seed) or the data of later contexts behind
train.py's back."""

from small_support import (DATA_GUARD_PROBE, SmallTask, assert_the_baseline_reproduced, assert_the_data_guard_refused,
                           assert_the_shared_attack_reached_nothing, needs_bwrap, shared_attack_run)

TASK = SmallTask("continual_learning_continual_learning")


shared_run = shared_attack_run(
    TASK, editable="algorithm.py", anchor="import torch.nn as nn",
    private=("test_y.npy", "visible_y.npy"), harness=("cl_data.py",), secrets=("test_y.npy", "cl_data.py"),
    extra=DATA_GUARD_PROBE)


def test_baseline_reproduces_the_declared_values(shared_run):
    assert_the_baseline_reproduced(TASK, shared_run)


@needs_bwrap
def test_method_code_cannot_reach_hidden_labels_harness_or_data(shared_run):
    # another run folder's private copy of the visible labels is no secret (data/ has them); test labels are
    run = assert_the_shared_attack_reached_nothing(shared_run)
    assert_the_data_guard_refused(run)
