"""robustness_openood: the baseline reproduces task.yaml, and agent code cannot reach the hidden test set."""

from small_support import (SmallTask, assert_the_baseline_reproduced, assert_the_shared_attack_reached_nothing,
                           needs_bwrap, shared_attack_run)

TASK = SmallTask("robustness_openood")


# The hidden test labels, and the harness (whose seeds regenerate the hidden test set and OOD source).
shared_run = shared_attack_run(
    TASK, editable="algorithm.py", anchor="import torch",
    private=("test_y.npy", "n_val_ood.npy"), harness=("ood_data.py",),
    secrets=("test_y.npy", "n_val_ood.npy", "ood_data.py", "prepare.py", "evaluate.py"))


def test_baseline_reproduces_the_declared_values(shared_run):
    assert_the_baseline_reproduced(TASK, shared_run)


@needs_bwrap
def test_agent_code_cannot_reach_the_hidden_test_set(shared_run):
    assert_the_shared_attack_reached_nothing(shared_run)
