"""data_efficiency_usb: the baseline reproduces task.yaml, and the hidden labels (pool and test) stay out of reach."""

import json

import pytest

from small_support import (SmallTask, assert_the_baseline_reproduced, assert_the_shared_attack_reached_nothing,
                           marked_lines, needs_bwrap, shared_attack_run)

TASK = SmallTask("data_efficiency_usb")

# besides the attack's probe: the unlabeled pool's labels (with them "semi-supervised" training becomes
# supervised), wherever the walk finds them
POOL_LABELS = r'''
_pool_labels = []
for _root, _dirs, _files in _os.walk("/", onerror=lambda e: None):
    if _root.startswith(_skip):
        _dirs[:] = []
        continue
    _pool_labels += [_os.path.join(_root, _f) for _f in _files if _f == "unlabeled_y.npy"]
print("POOL LABELS", _json.dumps(sorted(_pool_labels)), flush=True)
'''


# The pool's and the test's labels, and the harness that builds both (its seed would rebuild them).
shared_run = shared_attack_run(
    TASK, editable="algorithm.py",
    anchor="import torch.nn.functional as F", private=("unlabeled_y.npy", "test_y.npy"),
    harness=("ssl_digits.py",), secrets=("test_y.npy", "ssl_digits.py", "evaluate.py"), extra=POOL_LABELS)


def test_baseline_reproduces_the_declared_values(shared_run):
    assert_the_baseline_reproduced(TASK, shared_run)


@needs_bwrap
def test_the_hidden_labels_are_out_of_reach(shared_run):
    run = assert_the_shared_attack_reached_nothing(shared_run)
    (searched,) = marked_lines(run / "logs" / "step_0001_val.log", "POOL LABELS ")
    assert searched == "[]"  # the search workspace's own run never sees them
    leaks = sorted({path for log in ("final_val.log", "final_test.log")
                    for line in marked_lines(run / "logs" / log, "POOL LABELS ") for path in json.loads(line)})
    if leaks:
        # the search workspace's private folder (the pool's labels) stays readable from the final runs
        pytest.xfail("known sandbox gap: it hides the running workspace's private folder only; the final "
                     f"val/test runs can read the search workspace's pool labels: {leaks}")
