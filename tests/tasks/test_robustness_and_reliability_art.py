"""robustness_and_reliability_art: the baseline reproduces task.yaml, and agent code cannot reach the
triggers, the poison marks or the hidden test set."""

from small_support import (SmallTask, assert_the_baseline_reproduced, assert_the_shared_attack_reached_nothing,
                           needs_bwrap, shared_attack_run)

TASK = SmallTask("robustness_and_reliability_art")


# The hidden test labels, the poison marks, and the harness (trigger code and seeds).
shared_run = shared_attack_run(
    TASK, editable="algorithm.py", anchor="import torch",
    private=("test0_y.npy", "pool0_is_poison.npy"), harness=("backdoors.py", "poisoned_digits.py"),
    secrets=("test0_y.npy", "pool0_is_poison.npy", "backdoors.py", "poisoned_digits.py", "prepare.py",
             "evaluate.py"))


def test_baseline_reproduces_the_declared_values(shared_run):
    assert_the_baseline_reproduced(TASK, shared_run)


@needs_bwrap
def test_agent_code_cannot_reach_the_hidden_test_set(shared_run):
    assert_the_shared_attack_reached_nothing(shared_run)
