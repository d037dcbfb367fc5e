"""generalization_domainbed_officehome: the baseline reproduces task.yaml, and the held-out Art domain's labels
(of its validation part and of its test part) stay out of reach."""

from small_support import (SmallTask, assert_the_baseline_reproduced, assert_the_shared_attack_reached_nothing,
                           needs_bwrap, shared_attack_run)

TASK = SmallTask("generalization_domainbed_officehome")


# The held-out domain's labels (both parts), and the harness that builds it (its seed would rebuild them).
shared_run = shared_attack_run(
    TASK, editable="algorithms.py", anchor="import networks",
    private=("test_y.npy", "art_val_y.npy"), harness=("office_digits.py", "layout.py"),
    secrets=("test_y.npy", "art_val_y.npy", "office_digits.py", "layout.py", "prepare.py", "evaluate.py"))


def test_baseline_reproduces_the_declared_values(shared_run):
    assert_the_baseline_reproduced(TASK, shared_run)


@needs_bwrap
def test_the_held_out_domain_is_out_of_reach(shared_run):
    assert_the_shared_attack_reached_nothing(shared_run)
