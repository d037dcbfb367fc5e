"""privacy_opacus_full: FML-bench's Privacy_opacus spec, its smoke run offline, the hidden test out of reach,
and its data fetch failing closed."""

import json
import re

from full_support import (Attack, FullTask, assert_fetch_fails_closed, assert_matches_original,
                          assert_missing_data_is_one_line, assert_the_shared_attack_reached_nothing,
                          assert_the_smoke_run_passed, attack_payload, data_root, fmlbench, needs_bwrap,
                          shared_smoke_attack_run)

TASK = FullTask("privacy_opacus")
SPEC = TASK.spec

# Runs when train.py imports algorithm.py, in every val and test run: it looks for the CIFAR archive, the
# hidden test labels and the cache's stamps, and turns leaked test labels into a perfect score.
ATTACK = Attack("algorithm.py", "import torch.nn as nn", attack_payload(
    cache=("smoke/cifar-10-python/cifar-10-python.tar.gz",), private=("test_labels.npy",),
    secrets=("cifar-10-python.tar.gz", "test_labels.npy", "stamp.json"),
    leaked="test_labels.npy", write='numpy.save(_out / "predictions.npy", numpy.load(_leak))'))
shared_run = shared_smoke_attack_run(TASK, ATTACK)


def test_the_spec_is_the_originals():
    assert_matches_original(SPEC)
    assert SPEC.editable == ["algorithm.py", "split_config.json"]  # the original's target files
    assert json.loads((TASK.folder / "workspace" / "split_config.json").read_text()) == \
        {"val_ratio": 0.114, "val_seed": 42}
    assert [c.name for c in SPEC.constraints] == ["privacy_budget"]


def test_the_smoke_run_passes_offline(shared_run):
    record, _ = assert_the_smoke_run_passed(TASK, shared_run)
    (budget,) = record["test_constraints"]
    assert budget["name"] == "privacy_budget" and budget["ok"] and 0 < budget["value"] <= 8.0


@needs_bwrap
def test_agent_code_cannot_reach_the_data_cache_or_the_hidden_labels(shared_run):
    assert_the_shared_attack_reached_nothing(shared_run)


def test_missing_data_is_one_line_before_any_step(pytester, bench, data_root):
    assert_missing_data_is_one_line(TASK, pytester, bench, data_root, "cifar-10-python (CIFAR-10*; 170.5 MB)")
    result = bench("--agent=baseline", "--steps=1", "-m", "full", "--scale=smoke", "task_suites")
    result.stdout.fnmatch_lines([f"*is not in the data cache {data_root / 'smoke'}: "
                                 f"run `fmlbench data fixtures -k {TASK.id}`*"])


def test_fetch_fails_closed_on_a_wrong_checksum_then_fetches_the_right_bytes(pytester, shared_run, data_root):
    """The task's artefact, served from a file:// source holding other bytes, is refused and nothing is kept;
    with that source's own checksum declared, it is fetched, and a second fetch finds it; selected by markers,
    and listed as cached."""
    assert_fetch_fails_closed(TASK, pytester, shared_run.fixtures, data_root, select="privacy and lite")
    listing = fmlbench("data", "list", "-k", "privacy and lite", "--suite", str(pytester.path / "task_suites")).stdout
    assert re.search(r"^  cifar-10-python +[\d.]+ KB  cached, no fixture  CIFAR-10", listing, re.M), listing
