"""robustness_and_reliability_art: the baseline reproduces task.yaml, and agent code cannot reach the
triggers, the poison marks or the hidden test set."""

from small_support import SmallTask, assert_attack_reaches_nothing, assert_baseline_reproduces, needs_bwrap

TASK = SmallTask("robustness_and_reliability_art")


def test_baseline_reproduces_the_declared_values(pytester, bench):
    assert_baseline_reproduces(TASK, pytester, bench)


# The hidden test labels, the poison marks, and the harness (trigger code and seeds).
@needs_bwrap
def test_agent_code_cannot_reach_the_hidden_test_set(pytester, bench, write_agent, monkeypatch):
    assert_attack_reaches_nothing(
        TASK, pytester, bench, write_agent, monkeypatch, editable="algorithm.py", anchor="import torch",
        private=("test0_y.npy", "pool0_is_poison.npy"), harness=("backdoors.py", "poisoned_digits.py"),
        secrets=("test0_y.npy", "pool0_is_poison.npy", "backdoors.py", "poisoned_digits.py", "prepare.py",
                 "evaluate.py"))
