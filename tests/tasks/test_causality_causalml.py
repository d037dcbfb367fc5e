"""causality_causalml: the baseline reproduces task.yaml, and the true effects stay out of the agent's reach."""

from small_support import (SmallTask, assert_the_baseline_reproduced, assert_the_shared_attack_reached_nothing,
                           needs_bwrap, shared_attack_run)

TASK = SmallTask("causality_causalml")


# The true effects (the harness-private .npy files) and the simulation itself (ihdp_like.py holds the seeds,
# beta and omega).
shared_run = shared_attack_run(
    TASK, editable="algorithm.py", anchor="import numpy as np",
    private=("visible_ite.npy", "test_ite.npy"), harness=("ihdp_like.py",),
    secrets=("visible_ite.npy", "test_ite.npy", "ihdp_like.py", "prepare.py", "evaluate.py"))


def test_baseline_reproduces_the_declared_values(shared_run):
    assert_the_baseline_reproduced(TASK, shared_run)


@needs_bwrap
def test_the_true_effects_are_out_of_reach(shared_run):
    assert_the_shared_attack_reached_nothing(shared_run)
