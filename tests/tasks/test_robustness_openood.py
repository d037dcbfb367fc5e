"""robustness_openood: the baseline reproduces task.yaml, and agent code cannot reach the hidden test set."""

from small_support import SmallTask, assert_attack_reaches_nothing, assert_baseline_reproduces, needs_bwrap

TASK = SmallTask("robustness_openood")


def test_baseline_reproduces_the_declared_values(pytester, bench):
    assert_baseline_reproduces(TASK, pytester, bench)


# The hidden test labels, and the harness (whose seeds regenerate the hidden test set and OOD source).
@needs_bwrap
def test_agent_code_cannot_reach_the_hidden_test_set(pytester, bench, write_agent, monkeypatch):
    assert_attack_reaches_nothing(
        TASK, pytester, bench, write_agent, monkeypatch, editable="algorithm.py", anchor="import torch",
        private=("test_y.npy", "n_val_ood.npy"), harness=("ood_data.py",),
        secrets=("test_y.npy", "n_val_ood.npy", "ood_data.py", "prepare.py", "evaluate.py"))
