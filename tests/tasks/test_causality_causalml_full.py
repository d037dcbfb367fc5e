"""causality_causalml_full: FML-bench's Causality_causalml spec, IHDP's splits as the original cuts them, its
metrics, its smoke run offline, the hidden effects out of agent code's reach, and the causalml checkout's fetch
failing closed."""

import json
import subprocess
import sys

import numpy as np
import pytest

from full_support import (Attack, FullTask, assert_edits_the_originals_checkout, assert_fetch_fails_closed,
                          assert_matches_original, assert_missing_data_is_one_line,
                          assert_the_shared_attack_reached_nothing, assert_the_smoke_run_passed,
                          assert_workspace_holds_the_checkout, attack_payload, data_root, needs_bwrap,
                          shared_smoke_attack_run)

from pytest_fmlbench.scoring.original import builtin_tasks
from pytest_fmlbench.taskkit import ihdp

TASK = FullTask("causality_causalml")
SPEC = TASK.spec
EFFECTS = ("visible_tau.npy", "test_tau.npy")

# Runs when train.py imports DragonNet, in every val and test run: it looks for IHDP in the cache, the true
# effects in the private folder and anywhere else, and turns leaked test effects into a perfect score (MAE 0).
ATTACK = Attack("causalml/inference/tf/dragonnet.py", "import numpy as np", attack_payload(
    cache=("smoke/causalml/src/docs/examples/data/ihdp_npci_3.csv",), private=EFFECTS,
    secrets=(*EFFECTS, "ihdp_npci_3.csv", "stamp.json"),
    leaked="test_tau.npy", write='numpy.save(_out / "ite_predictions.npy", numpy.load(_leak))'))
shared_run = shared_smoke_attack_run(TASK, ATTACK)


def harness(script: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(TASK.folder / "harness" / script), *args], capture_output=True,
                          text=True, timeout=300)


def test_the_spec_is_the_originals():
    assert_matches_original(SPEC, cpu_only=True)
    checkout = assert_edits_the_originals_checkout(SPEC)  # causalml's DragonNet files and split_config.json
    assert checkout.urls == ["https://github.com/uber/causalml.git"]
    assert json.loads((TASK.folder / "workspace" / "split_config.json").read_text()) == \
        {"val_ratio": 0.114, "val_seed": 42}
    assert SPEC.constraints == []
    # measured here (TensorFlow 2.21); the paper's values, from TensorFlow 2.10, are named beside them
    assert (SPEC.baseline.source, SPEC.baseline.val, SPEC.baseline.test) == \
        ("measured", 1.3039056700922746, 1.336669549928667)
    facts = builtin_tasks()[SPEC.original.task]
    assert f"{facts.baseline_val:.4f} val, {facts.baseline_test:.4f} test" in SPEC.baseline.note


def test_the_splits_are_the_originals():
    """The original cuts IHDP with train_test_split on its data frames: the hidden test first (21%, seed 42),
    then the visible pool by split_config.json; the same positions, in the same order, as cutting indices."""
    from sklearn.model_selection import train_test_split

    rng = np.random.default_rng(0)
    frame = rng.standard_normal((747, 3))
    visible_rows, test_rows = train_test_split(frame, test_size=0.21, random_state=42, shuffle=True)
    test, visible = ihdp.hidden_test(747)
    assert (len(test), len(visible)) == (157, 590)
    assert np.array_equal(frame[test], test_rows) and np.array_equal(frame[visible], visible_rows)
    train, val = ihdp.visible_split(590, 0.114, 42)
    assert (len(train), len(val)) == (522, 68)  # the original's "Train: 522, Val: 68, Test: 157"
    assert np.array_equal(np.sort(np.concatenate([train, val])), np.arange(590))


def test_prepare_keeps_effects_and_counterfactuals_out_of_the_workspace(tmp_path, data_root):
    from pytest_fmlbench.taskkit import fixtures

    fixtures.causalml_repo(data_root / "causalml" / "src")
    units = ihdp.read(data_root / "causalml" / "src" / "docs" / "examples" / "data" / "ihdp_npci_3.csv")
    sign = np.where(units["treatment"] == 1, 1, -1)  # y1 - y0, whichever of them was observed
    assert np.allclose(units["tau"], sign * (units["y_factual"] - units["y_cfactual"]))
    workspace, out, private = tmp_path / "workspace", tmp_path / "out", tmp_path / "private"
    for split in ("val", "test"):
        done = harness("prepare.py", "--split", split, "--workspace", str(workspace), "--out", str(out),
                       "--private", str(private), "--data", str(data_root))
        assert done.returncode == 0, done.stderr
    visible = (workspace / "data" / "visible.csv").read_text().splitlines()
    assert visible[0] == ",".join(["treatment", "y_factual", *ihdp.COVARIATES]) and len(visible) == 1 + 94
    assert (out / "test_covariates.csv").read_text().splitlines()[0] == ",".join(ihdp.COVARIATES)
    test, visible_pos = ihdp.hidden_test(len(units))
    assert np.allclose(np.load(private / "test_tau.npy"), units["tau"].to_numpy()[test])
    assert np.allclose(np.load(private / "visible_tau.npy"), units["tau"].to_numpy()[visible_pos])
    assert not any(p.suffix == ".npy" for p in workspace.rglob("*"))


def test_the_evaluator_scores_the_originals_metrics(tmp_path):
    tau, treatment, outcome = np.array([4.0, 2.0, 6.0, 3.0]), np.array([1, 0, 1, 0]), np.array([9.0, 1.0, 8.0, 2.0])
    private, out, workspace = tmp_path / "private", tmp_path / "out", tmp_path / "workspace"
    for folder in (private, out, workspace):
        folder.mkdir()
    for name, values in (("tau", tau), ("treatment", treatment), ("y_factual", outcome)):
        np.save(private / f"test_{name}.npy", values)
    estimates = np.array([3.0, 2.0, 8.0, 3.0])
    np.save(out / "ite_predictions.npy", estimates)
    done = harness("evaluate.py", "--split", "test", "--workspace", str(workspace), "--out", str(out),
                   "--private", str(private), "--result", str(tmp_path / "result.json"))
    assert done.returncode == 0, done.stderr
    means = json.loads((tmp_path / "result.json").read_text())["datasets"]["ihdp_test"]["means"]
    assert means["mae_mean"] == pytest.approx(0.75) and means["mse_mean"] == pytest.approx(1.25)
    assert means["ate_mean"] == pytest.approx(4.0) and means["abs_pct_error_of_ate_mean"] == pytest.approx(1 / 15)
    assert 0 <= means["auuc_mean"] <= 1
    np.save(out / "ite_predictions.npy", estimates[:3])  # one effect short
    done = harness("evaluate.py", "--split", "test", "--workspace", str(workspace), "--out", str(out),
                   "--private", str(private), "--result", str(tmp_path / "result.json"))
    assert done.returncode == 1 and done.stderr.strip().splitlines() == [
        "evaluate.py: ite_predictions.npy has shape (3,), expected (4,)"]


def test_the_smoke_run_passes_offline(shared_run):
    data_root = shared_run.data_root
    record, run = assert_the_smoke_run_passed(TASK, shared_run, metric_range=(0, 50))
    # the workspace holds the checkout's causalml package, the editable DragonNet files included
    checkout = data_root / "smoke" / "causalml" / "src"
    assert_workspace_holds_the_checkout(shared_run.attack, run, checkout,
                                        [p for p in SPEC.editable if p.startswith("causalml/")])
    assert not (run / "search" / "workspace" / "docs").exists()  # IHDP's file stays in the cache
    # the test run trains on the default cut of the 94 visible fixture units, as the original's test does
    assert "train 83, val 11 (val_ratio 0.114, val_seed 42)" in (run / "logs" / "final_test.log").read_text()
    assert record["test_metric"] > 0


@needs_bwrap
def test_agent_code_cannot_reach_the_data_cache_or_the_true_effects(shared_run):
    assert_the_shared_attack_reached_nothing(shared_run, perfect=0.0)


def test_missing_data_is_one_line_before_any_step(pytester, bench, data_root):
    assert_missing_data_is_one_line(TASK, pytester, bench, data_root, "causalml (causalml (uber)*; a git checkout)")


def test_fetch_fails_closed_on_a_repository_without_the_pinned_commit(pytester, shared_run, data_root):
    """The checkout, cloned from a fixture repository that lacks the pinned commit, is refused and nothing is
    kept; with that repository's own commit declared, it is fetched, DragonNet's files and IHDP in it."""
    assert_fetch_fails_closed(TASK, pytester, shared_run.fixtures, data_root)
    assert (data_root / "causalml" / "src" / "docs" / "examples" / "data" / "ihdp_npci_3.csv").is_file()
