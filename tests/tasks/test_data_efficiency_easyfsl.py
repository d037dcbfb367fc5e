"""data_efficiency_easyfsl: the baseline reproduces task.yaml, and the hidden test classes, episodes and labels
stay out of reach (the episode protocol is the kit's few_shot_episodes, one source for the experiment and the
evaluator)."""

from small_support import SmallTask, assert_attack_reaches_nothing, assert_baseline_reproduces, needs_bwrap

TASK = SmallTask("data_efficiency_easyfsl")


def test_baseline_reproduces_the_declared_values(pytester, bench):
    assert_baseline_reproduces(TASK, pytester, bench)


# The hidden test episodes' query labels, and the harness that renders the hidden test classes and draws the
# episodes (its seeds would rebuild them).
@needs_bwrap
def test_the_hidden_test_episodes_are_out_of_reach(pytester, bench, write_agent, monkeypatch):
    assert_attack_reaches_nothing(
        TASK, pytester, bench, write_agent, monkeypatch, editable="few_shot.py", anchor="import torch.nn as nn",
        private=("test_query_y.npy", "labels.npy"), harness=("glyphs.py", "prepare.py"),
        secrets=("test_query_y.npy", "glyphs.py", "prepare.py", "evaluate.py"))
