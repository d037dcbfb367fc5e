"""fairness_and_bias_aif360: the baseline reproduces task.yaml, and the hidden test labels stay out of reach."""

from small_support import (SmallTask, assert_the_baseline_reproduced, assert_the_shared_attack_reached_nothing,
                           needs_bwrap, shared_attack_run)

TASK = SmallTask("fairness_and_bias_aif360")


# The hidden test rows with their labels (PRIVATE/test.csv) and the population generator with its seeds
# (harness/compas_like.py).
shared_run = shared_attack_run(
    TASK, editable="algorithm.py", anchor="import numpy as np",
    private=("test.csv", "visible.csv"), harness=("compas_like.py",),
    secrets=("test.csv", "compas_like.py", "prepare.py", "evaluate.py"))


def test_baseline_reproduces_the_declared_values(shared_run):
    assert_the_baseline_reproduced(TASK, shared_run)


@needs_bwrap
def test_the_hidden_test_labels_are_out_of_reach(shared_run):
    assert_the_shared_attack_reached_nothing(shared_run)
