"""privacy_privacymeter: the baseline reproduces task.yaml; the auditor trusts nothing the experiment leaves
behind; the hidden non-members and the reference models stay out of the experiment's reach."""

import importlib.util
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest

from small_support import (SmallTask, assert_the_baseline_reproduced, assert_the_shared_attack_reached_nothing,
                           needs_bwrap, shared_attack_run)

TASK = SmallTask("privacy_privacymeter")
SOURCE = TASK.folder


def _harness_module(name):
    spec = importlib.util.spec_from_file_location(f"privacymeter_{name}", SOURCE / "harness" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # pydantic resolves the postponed annotations through sys.modules
    spec.loader.exec_module(module)
    return module


def test_roc_points_match_sklearn():
    from sklearn.metrics import auc, roc_curve

    rmia = _harness_module("rmia")
    rng = np.random.default_rng(0)
    for _ in range(100):
        n = int(rng.integers(4, 300))
        membership = rng.random(n) < 0.5
        membership[:2] = [True, False]
        scores = np.round(rng.random(n) * rng.integers(2, 50)) / 10  # many ties, as RMIA's counts have
        fpr, tpr, _ = roc_curve(membership.astype(int), scores)
        ours = rmia.attack_results(scores, membership)
        assert ours["AUC"] == pytest.approx(auc(fpr, tpr), abs=1e-12)
        assert ours["TPR@0.0%FPR"] == pytest.approx(tpr[np.where(fpr <= 0.0)[0][-1]], abs=1e-12)
        assert ours["TPR@0.1%FPR"] == pytest.approx(tpr[np.where(fpr <= 0.001)[0][-1]], abs=1e-12)


class _Payload:
    """Unpickling this runs code: it leaves a marker file behind."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _evaluate(tmp_path, out):
    private = tmp_path / "private"
    private.mkdir(exist_ok=True)
    return subprocess.run(
        [sys.executable, "-s", "-E", str(SOURCE / "harness" / "evaluate.py"), "--split", "val",
         "--workspace", str(tmp_path), "--out", str(out), "--private", str(private),
         "--result", str(tmp_path / "result.json")],
        capture_output=True, text=True,
        cwd=SOURCE / "harness", timeout=120,
    )


@pytest.mark.parametrize("forgery", ["pickle", "link", "other_network", "nan"])
def test_the_auditor_loads_only_plain_weights_of_the_declared_network(tmp_path, forgery):
    import torch

    from pytest_fmlbench.taskkit import digit_convnets  # torch's networks: imported on use, not at collection

    out = tmp_path / "out"
    out.mkdir()
    spec = digit_convnets.ArchitectureSpec()
    (out / "model_spec.json").write_text(spec.model_dump_json())
    marker = tmp_path / "code_ran"
    weights = digit_convnets.build(spec).state_dict()
    if forgery == "pickle":
        (out / "model.pt").write_bytes(pickle.dumps({"weights": _Payload(marker)}))
    elif forgery == "link":
        torch.save(weights, tmp_path / "elsewhere.pt")
        (out / "model.pt").symlink_to(tmp_path / "elsewhere.pt")
    elif forgery == "other_network":
        torch.save(digit_convnets.build(digit_convnets.ArchitectureSpec(width=8)).state_dict(), out / "model.pt")
    else:
        weights[next(iter(weights))][0] = float("nan")
        torch.save(weights, out / "model.pt")
    result = _evaluate(tmp_path, out)
    assert result.returncode == 1, result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("evaluate.py: ")
    assert not marker.exists() and not (tmp_path / "result.json").exists()


# The auditor's reference signals (PRIVATE/reference_<split>.npz) and the data carve with its seeds
# (harness/noisy_digits.py, which would hand the experiment the hidden non-members: trained on, they become
# members and the attack blind) stay out of the experiment's reach.
shared_run = shared_attack_run(
    TASK, editable="algorithm.py", anchor="import torch.nn as nn",
    private=("reference_val.npz", "reference_test.npz"), harness=("noisy_digits.py", "reference.py"),
    secrets=("reference_val.npz", "reference_test.npz", "noisy_digits.py", "rmia.py"))


def test_baseline_reproduces_the_declared_values(shared_run):
    assert_the_baseline_reproduced(TASK, shared_run)


@needs_bwrap
def test_hidden_non_members_and_reference_models_are_out_of_reach(shared_run):
    assert_the_shared_attack_reached_nothing(shared_run)
