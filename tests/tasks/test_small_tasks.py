"""What every small task declares alike, checked for each: its markers (its domain, and lite exactly where
the original is in FML-bench-Lite). Each task's own file reproduces its baseline and attacks its hidden data."""

import pytest

from small_support import SMALL_TASKS, SmallTask, assert_markers


@pytest.mark.parametrize("task_id", SMALL_TASKS)
def test_the_markers_say_the_domain_and_lite(task_id):
    assert_markers(SmallTask(task_id))
