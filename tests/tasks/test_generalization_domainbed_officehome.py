"""generalization_domainbed_officehome: the baseline reproduces task.yaml, and the held-out Art domain stays
out of reach."""

from small_support import SmallTask, assert_attack_reaches_nothing, assert_baseline_reproduces, needs_bwrap

TASK = SmallTask("generalization_domainbed_officehome")


def test_baseline_reproduces_the_declared_values(pytester, bench):
    assert_baseline_reproduces(TASK, pytester, bench)


# The held-out domain's labels, and the harness that builds it (its seed would rebuild them).
@needs_bwrap
def test_the_held_out_domain_is_out_of_reach(pytester, bench, write_agent, monkeypatch):
    assert_attack_reaches_nothing(
        TASK, pytester, bench, write_agent, monkeypatch, editable="algorithms.py", anchor="import networks",
        private=("test_y.npy",), harness=("office_digits.py", "layout.py"),
        secrets=("test_y.npy", "office_digits.py", "layout.py", "prepare.py", "evaluate.py"))
