"""causality_causalml: the baseline reproduces task.yaml, the score is the mean over the replications of the
simulated outcomes, and the true effects stay out of the agent's reach."""

import pytest

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


def test_each_replication_is_scored_and_the_metric_is_their_mean(shared_run):
    # version 2: three draws of the response surface for the same units, each a data set of its own
    metrics = shared_run.record["test_metrics"]
    assert sorted(key for key in metrics if key.endswith("/mae")) == [f"ihdp_like_{r}/mae" for r in range(3)]
    maes = [metrics[f"ihdp_like_{r}/mae"] for r in range(3)]
    assert len(set(maes)) == 3  # three different draws, not one scored three times
    assert shared_run.record["test_metric"] == pytest.approx(sum(maes) / 3, rel=1e-12)


@needs_bwrap
def test_the_true_effects_are_out_of_reach(shared_run):
    assert_the_shared_attack_reached_nothing(shared_run)
