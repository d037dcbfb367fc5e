"""fairness_and_bias_aif360: the baseline reproduces task.yaml, and the hidden test labels stay out of reach."""

from small_support import SmallTask, assert_attack_reaches_nothing, assert_baseline_reproduces, needs_bwrap

TASK = SmallTask("fairness_and_bias_aif360")


def test_baseline_reproduces_the_declared_values(pytester, bench):
    assert_baseline_reproduces(TASK, pytester, bench)


# The hidden test rows with their labels (PRIVATE/test.csv) and the population generator with its seeds
# (harness/compas_like.py).
@needs_bwrap
def test_the_hidden_test_labels_are_out_of_reach(pytester, bench, write_agent, monkeypatch):
    assert_attack_reaches_nothing(
        TASK, pytester, bench, write_agent, monkeypatch, editable="algorithm.py", anchor="import numpy as np",
        private=("test.csv", "visible.csv"), harness=("compas_like.py",),
        secrets=("test.csv", "compas_like.py", "prepare.py", "evaluate.py"))
