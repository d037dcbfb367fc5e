"""causality_causalml: the baseline reproduces task.yaml, and the true effects stay out of the agent's reach."""

from small_support import SmallTask, assert_attack_reaches_nothing, assert_baseline_reproduces, needs_bwrap

TASK = SmallTask("causality_causalml")


def test_baseline_reproduces_the_declared_values(pytester, bench):
    assert_baseline_reproduces(TASK, pytester, bench)


# The true effects (the harness-private .npy files) and the simulation itself (ihdp_like.py holds the seeds,
# beta and omega).
@needs_bwrap
def test_the_true_effects_are_out_of_reach(pytester, bench, write_agent, monkeypatch):
    assert_attack_reaches_nothing(
        TASK, pytester, bench, write_agent, monkeypatch, editable="algorithm.py", anchor="import numpy as np",
        private=("visible_ite.npy", "test_ite.npy"), harness=("ihdp_like.py",),
        secrets=("visible_ite.npy", "test_ite.npy", "ihdp_like.py", "prepare.py", "evaluate.py"))
