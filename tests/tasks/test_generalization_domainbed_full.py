"""generalization_domainbed_full: FML-bench's Generalization_domainbed spec, DomainBed's files in the
workspace, its smoke run offline, the hidden test out of reach, one-line preflight, fetch failing closed."""

import re

from full_support import (Attack, FullTask, assert_edits_the_originals_checkout, assert_fetch_fails_closed,
                          assert_matches_original, assert_missing_data_is_one_line,
                          assert_the_shared_attack_reached_nothing, assert_the_smoke_run_passed,
                          assert_workspace_holds_the_checkout, attack_payload, data_root, needs_bwrap,
                          shared_smoke_attack_run)

TASK = FullTask("generalization_domainbed")
SPEC = TASK.spec

# Runs when train.py imports DomainBed's algorithms.py, in every val and test run: it looks for the MNIST
# archive, DomainBed's checkout, the hidden labels and the cache's stamps, and turns leaked test labels into
# a perfect score.
ATTACK = Attack("domainbed/algorithms.py", "import torch.nn.functional as F", attack_payload(
    cache=("smoke/mnist-npz/mnist.npz", "smoke/domainbed/src"), private=("test_labels.npy",),
    secrets=("mnist.npz", "test_labels.npy", "val_labels.npy", "stamp.json"),
    leaked="test_labels.npy", write='numpy.save(_out / "predictions.npy", numpy.load(_leak))'))
shared_run = shared_smoke_attack_run(TASK, ATTACK)


def test_the_spec_is_the_originals():
    assert_matches_original(SPEC)
    assert_edits_the_originals_checkout(SPEC)  # DomainBed's algorithms.py and networks.py
    assert SPEC.constraints == [] and "split_config.json" not in SPEC.editable  # the original's split is fixed


def test_the_smoke_run_passes_offline_on_domainbeds_files(shared_run):
    data_root = shared_run.data_root
    _, run = assert_the_smoke_run_passed(TASK, shared_run)
    # the workspace holds the checkout's files (the smoke stand-in's), and the driver trained with them
    assert_workspace_holds_the_checkout(shared_run.attack, run, data_root / "smoke" / "domainbed" / "src", (
        "domainbed/algorithms.py", "domainbed/networks.py", "domainbed/lib/fast_data_loader.py"))
    log = (run / "logs" / "step_0001_val.log").read_text()
    assert re.search(r"^step=2 .*env0_out_acc=", log, re.M), log


@needs_bwrap
def test_agent_code_cannot_reach_the_data_cache_or_the_hidden_labels(shared_run):
    assert_the_shared_attack_reached_nothing(shared_run)


def test_missing_data_is_one_line_before_any_step(pytester, bench, data_root):
    assert_missing_data_is_one_line(TASK, pytester, bench, data_root, "mnist-npz (MNIST*; 11.5 MB)")


def test_fetch_fails_closed_then_fetches_the_archive_and_domainbed_at_its_commit(pytester, shared_run, data_root):
    """The archive, served from a file:// source holding other bytes, is refused and nothing is kept; with that
    source's own checksum declared it is fetched. DomainBed comes from a fixture repository: a commit it does
    not hold is refused, its own commit is checked out."""
    assert_fetch_fails_closed(TASK, pytester, shared_run.fixtures, data_root)
