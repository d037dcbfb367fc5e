"""data_efficiency_easyfsl: the baseline reproduces task.yaml, and the hidden test classes, episodes and labels
stay out of reach (the episode protocol is the kit's few_shot_episodes, one source for the experiment and the
evaluator)."""

from small_support import (SmallTask, assert_the_baseline_reproduced, assert_the_shared_attack_reached_nothing,
                           needs_bwrap, shared_attack_run)

TASK = SmallTask("data_efficiency_easyfsl")


# The hidden test episodes' query labels, and the harness that renders the hidden test classes and draws the
# episodes (its seeds would rebuild them).
shared_run = shared_attack_run(
    TASK, editable="few_shot.py", anchor="import torch.nn as nn",
    private=("test_query_y.npy", "labels.npy"), harness=("glyphs.py", "prepare.py"),
    secrets=("test_query_y.npy", "glyphs.py", "prepare.py", "evaluate.py"))


def test_baseline_reproduces_the_declared_values(shared_run):
    assert_the_baseline_reproduced(TASK, shared_run)


@needs_bwrap
def test_the_hidden_test_episodes_are_out_of_reach(shared_run):
    assert_the_shared_attack_reached_nothing(shared_run)
