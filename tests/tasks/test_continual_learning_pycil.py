"""continual_learning_pycil: the baseline reproduces task.yaml, and the method's code cannot
reach the hidden test labels, the harness (with the test seed) or the data of later sessions behind
train.py's back."""

from small_support import (DATA_GUARD_PROBE, SmallTask, assert_attack_reaches_nothing, assert_baseline_reproduces,
                           assert_the_data_guard_refused, needs_bwrap)

TASK = SmallTask("continual_learning_pycil")


def test_baseline_reproduces_the_declared_values(pytester, bench):
    assert_baseline_reproduces(TASK, pytester, bench)


@needs_bwrap
def test_method_code_cannot_reach_hidden_labels_harness_or_data(pytester, bench, write_agent, monkeypatch):
    # another run folder's private copy of the visible labels is no secret (data/ has them); test labels are
    run = assert_attack_reaches_nothing(
        TASK, pytester, bench, write_agent, monkeypatch, editable="algorithm.py", anchor="import torch.nn as nn",
        private=("test_y.npy", "visible_y.npy"), harness=("glyph_data.py",), secrets=("test_y.npy", "glyph_data.py"),
        extra=DATA_GUARD_PROBE)
    assert_the_data_guard_refused(run)
