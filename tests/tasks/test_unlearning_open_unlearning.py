"""unlearning_open_unlearning: the baseline reproduces task.yaml, and agent code cannot reach the
retain-only reference, the hidden test items or the harness."""

import importlib.util
import json
import subprocess
import sys

from small_support import (SmallTask, assert_the_baseline_reproduced, assert_the_shared_attack_reached_nothing,
                           needs_bwrap, shared_attack_run)

TASK = SmallTask("unlearning_open_unlearning")
TASK_DIR = TASK.folder


# The retain-only reference (truth ratios), and the harness (whose seeds regenerate the hidden test items).
# The full model is no secret: prepare.py gives the workspace a copy of it.
shared_run = shared_attack_run(
    TASK, editable="algorithm.py", anchor="import torch",
    harness=("reference/reference.json", "authors.py"),
    secrets=("reference.json", "authors.py", "build_reference.py", "prepare.py", "evaluate.py"))


def test_baseline_reproduces_the_declared_values(shared_run):
    assert_the_baseline_reproduced(TASK, shared_run)


@needs_bwrap
def test_agent_code_cannot_reach_the_hidden_test_set(shared_run):
    assert_the_shared_attack_reached_nothing(shared_run)


CHECK_REFERENCE = """
import json, sys
import numpy as np
import torch
from safetensors.torch import load_model
from authors import population
from lm import make_model, truth_ratios
from recipe import REFERENCE_DIR, fingerprint
reference = json.loads((REFERENCE_DIR / "reference.json").read_text())
assert reference["fingerprint"] == fingerprint(), "reference/ is stale: run build_reference.py"
torch.set_num_threads(1)
pop = population()
model = make_model(len(pop["vocab"]))
load_model(model, str(REFERENCE_DIR / "full_model.safetensors"))
for split in ("val", "test"):
    ratios = truth_ratios(model, pop[split + "_items"], pop["vocab"])
    # float32 inference rounds differently from one CPU's kernels to the next: pinning MKL, oneDNN and ATen to
    # other instruction sets here moved the ratios by up to 3.5e-6 (scripts/baseline_spread.py's variants);
    # weights scaled by 1 + 1e-4 noise move them by 1e-3
    np.testing.assert_allclose(ratios, reference["full_model"][split], rtol=1e-5)
    assert len(reference["retain_model"][split]) == len(ratios)
print("reference ok")
"""


def test_the_shipped_models_match_the_recipe_that_built_them():
    """The full model in reference/ is the one the recorded truth ratios came from, built by this code."""
    done = subprocess.run([sys.executable, "-c", CHECK_REFERENCE], cwd=TASK_DIR / "harness",
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "reference ok" in done.stdout, done.stderr[-2000:]


def test_forget_quality_is_scored_on_enough_items_to_tell_methods_apart(monkeypatch):
    """Version 2 (issue 45): a KS p-value over n items moves in steps of 1/n. Version 1 scored 29 test items
    (19 on validation), too few for the baseline to score other than the untouched model or for validation
    to pick a better configuration; version 2 scores TOFU's 200-author forget10 with five wrong answers each."""
    spec = importlib.util.spec_from_file_location("unlearning_authors", TASK_DIR / "harness" / "authors.py")
    authors = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, authors)  # its dataclasses look their module up there
    spec.loader.exec_module(authors)
    pop = authors.population()
    reference = json.loads((TASK_DIR / "harness" / "reference" / "reference.json").read_text())
    assert (len(pop["val_items"]), len(pop["test_items"])) == (64, 96)
    assert all(len(item["perturbed"]) == 5 for item in pop["val_items"] + pop["test_items"])
    assert {split: len(reference["retain_model"][split]) for split in ("val", "test")} == {"val": 64, "test": 96}
