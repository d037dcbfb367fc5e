"""fairness_and_bias_aif360_full: FML-bench's Fairness_and_Bias_aif360 spec, AIF360's file in the workspace, COMPAS
prepared and cut by AIF360's code as the original does, the original's accuracy floor, the smoke run offline, the
hidden test out of reach, one-line preflight, fetch failing closed on the file and the checkout."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pytest_fmlbench.scoring.original import builtin_tasks
from pytest_fmlbench.taskkit import compas, fixtures

from full_support import (Attack, FullTask, assert_edits_the_originals_checkout, assert_fetch_fails_closed,
                          assert_matches_original, assert_missing_data_is_one_line,
                          assert_the_shared_attack_reached_nothing, assert_the_smoke_run_passed,
                          assert_workspace_holds_the_checkout, attack_payload, data_root, needs_bwrap,
                          shared_smoke_attack_run)

TASK = FullTask("fairness_and_bias_aif360")
SPEC, ARTIFACTS = TASK.spec, TASK.artifacts
EDITABLE = "aif360/algorithms/inprocessing/adversarial_debiasing.py"

# Runs when train.py imports AIF360's adversarial_debiasing.py, in every val and test run: it looks for ProPublica's
# file, the checkout, the hidden labels and the cache's stamps, and turns leaked test labels into a perfect score.
ATTACK = Attack(EDITABLE, "import numpy as np", attack_payload(
    cache=("smoke/compas-scores-two-years/compas-scores-two-years.csv", "smoke/aif360/src"),
    private=("test_truth.csv", "val_truth.csv"),
    secrets=("compas-scores-two-years.csv", "test_truth.csv", "val_truth.csv", "stamp.json"),
    leaked="test_truth.csv",
    write='numpy.save(_out / "predictions.npy", numpy.genfromtxt(_leak, delimiter=",", skip_header=1)[:, -1]'
          '.astype("int8"))'))
shared_run = shared_smoke_attack_run(TASK, ATTACK)


def test_the_spec_is_the_originals():
    assert_matches_original(SPEC, cpu_only=True)  # a one-layer network on 3,694 rows; TensorFlow's CPU build
    checkout = assert_edits_the_originals_checkout(SPEC)  # AIF360's adversarial_debiasing.py
    # the commit FML-bench's setup.py clones (its config.json names the local commit setup.py adds on top)
    assert checkout.commit == "cd7e2138b7919e0796db7e7902bf49b20065f4f8"
    assert [c.name for c in SPEC.constraints] == ["accuracy_floor"]
    # measured here at full scale on a CPU, and equal to the original's published values
    facts = builtin_tasks()[SPEC.original.task]
    assert SPEC.baseline.source == "measured" and (SPEC.baseline.val, SPEC.baseline.test) == \
        (facts.baseline_val, facts.baseline_test)
    assert not (TASK.folder / "workspace" / "split_config.json").exists()  # the original's cuts are fixed
    csv = ARTIFACTS["compas-scores-two-years"]
    assert csv.sha256 == "c451db85908b2f7fef1d83203bedf6b71ecda0d5af468d82ae62178f91d0cc7d" and csv.size == 2546489
    assert "bafff5da3f2e45eca6c2d5055faad269defd135a" in csv.urls[0]
    # the workspace's AIF360 must be the one train.py imports: no warm parent imports aif360 (or TensorFlow)
    assert not {"aif360", "tensorflow"} & {name.split(".")[0] for name in SPEC.warm}


@pytest.fixture(scope="module")
def aif360_checkout(tmp_path_factory) -> Path:
    """The smoke stand-in of AIF360's checkout: AIF360's own package, as installed."""
    checkout = tmp_path_factory.mktemp("aif360") / "src"
    fixtures.aif360_repo(checkout)
    return checkout


def test_compas_is_prepared_and_cut_by_aif360_as_the_original_does(tmp_path, aif360_checkout):
    """AIF360's load_preproc_data_compas on ProPublica's layout, then the original's two seeded shuffles: 70% train,
    then 30% / 70% of the rest into val and test; disjoint, every row once, the same every time."""
    csv = tmp_path / "compas-scores-two-years.csv"
    compas.write_fixture(csv)
    raw = pd.read_csv(csv)
    assert list(raw.columns[:6]) == ["id", "name", "first", "last", "compas_screening_date", "sex"]
    assert raw.shape[1] == 53 and "decile_score.1" in raw and "priors_count.1" in raw  # ProPublica's repeated names
    splits, (rows, rest) = compas.original_splits(aif360_checkout, csv)
    sizes = {name: len(table) for name, table in splits.items()}
    assert sizes["train"] == int(0.7 * rows) and rest == rows - sizes["train"]
    assert sizes["val"] == int(0.3 * rest) and sizes["test"] == rest - sizes["val"]
    ids = [set(table.index) for table in splits.values()]
    assert sum(map(len, ids)) == rows and len(set.union(*ids)) == rows
    assert list(splits["train"].columns[:2]) == ["sex", "race"] and splits["train"].columns[-1] == compas.LABEL
    assert set(np.unique(splits["train"].to_numpy())) <= {0.0, 1.0}
    again, _ = compas.original_splits(aif360_checkout, csv)
    assert all(again[name].equals(splits[name]) for name in splits)
    assert "aif360" not in sys.modules or "fmlbench-aif360-" not in (sys.modules["aif360"].__file__ or "")


# the original's published baseline accuracies (FML-bench d336651, ml_tasks/Fairness_and_Bias_aif360/baseline_results)
PUBLISHED_ACCURACY = {"val": 0.6757894736842105, "test": 0.6429215509467989}


def test_the_cuts_of_5278_rows_are_those_the_originals_published_accuracies_count():
    """AIF360's split of the 5,278 preprocessed rows gives 3,694 / 475 / 1,109; the published accuracies are whole
    counts of those (321 of 475 val, 713 of 1,109 test)."""
    train = int(0.7 * 5278)
    val = int(0.3 * (5278 - train))
    test = 5278 - train - val
    assert (train, val, test) == (3694, 475, 1109)
    for split, n in (("val", val), ("test", test)):
        assert abs(PUBLISHED_ACCURACY[split] * n - round(PUBLISHED_ACCURACY[split] * n)) < 1e-6


def _evaluate(tmp_path: Path, checkout: Path, split: str, truth: pd.DataFrame, pred: np.ndarray) -> dict:
    private, out, data = tmp_path / "private", tmp_path / "out", tmp_path / "data"
    private.mkdir(exist_ok=True)
    out.mkdir(exist_ok=True)
    (data / "aif360").mkdir(parents=True, exist_ok=True)
    if not (data / "aif360" / "src").exists():
        (data / "aif360" / "src").symlink_to(checkout)
    truth.to_csv(private / f"{split}_truth.csv")
    np.save(out / "predictions.npy", pred.astype(np.int8))
    result = tmp_path / f"{split}.json"
    done = subprocess.run([sys.executable, str(TASK.folder / "harness" / "evaluate.py"), "--split", split,
                           "--out", str(out), "--private", str(private), "--result", str(result), "--data", str(data)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(result.read_text())


def test_the_evaluator_is_aif360s_metric_and_the_originals_floor(tmp_path, aif360_checkout):
    """abs_aod_mean is |AOD| with sex = 1 privileged and label 0 favorable; the accuracy floor is the original's
    0.63510101010101 on val and 0.01 lower on the test."""
    rng = np.random.default_rng(0)
    n = 400
    truth = pd.DataFrame({"sex": (rng.random(n) < 0.3).astype(float), "race": (rng.random(n) < 0.5).astype(float),
                          compas.LABEL: (rng.random(n) < 0.45).astype(float)}, index=pd.Index(range(n), name="id"))
    correct = np.zeros(n, dtype=bool)
    correct[rng.permutation(n)[:254]] = True  # accuracy 0.635: under the val floor (0.6351), over the test's (0.6251)
    pred = np.where(correct, truth[compas.LABEL], 1 - truth[compas.LABEL]).astype(int)
    y, sex = truth[compas.LABEL].to_numpy(), truth["sex"].to_numpy()
    favorable_rate = {g: {truth_label: np.mean(pred[(sex == g) & (y == truth_label)] == 0) for truth_label in (0, 1)}
                      for g in (0, 1)}  # TPR: label 0 predicted among label 0; FPR: label 0 predicted among label 1
    aod = 0.5 * ((favorable_rate[0][1] - favorable_rate[1][1]) + (favorable_rate[0][0] - favorable_rate[1][0]))
    accuracy = float(np.mean(pred == y))
    assert 0.62510101010101 <= accuracy < 0.63510101010101, accuracy
    for split, ok in (("val", False), ("test", True)):
        result = _evaluate(tmp_path, aif360_checkout, split, truth, pred)
        means = result["datasets"]["compas"]["means"]
        assert means["abs_aod_mean"] == pytest.approx(abs(aod)) and means["cls_acc_mean"] == pytest.approx(accuracy)
        (floor,) = result["constraints"]
        assert floor["name"] == "accuracy_floor" and floor["ok"] is ok


def test_the_smoke_run_passes_offline_on_aif360s_own_file(shared_run):
    data_root = shared_run.data_root
    record, run = assert_the_smoke_run_passed(TASK, shared_run)
    (floor,) = record["test_constraints"]
    assert floor["name"] == "accuracy_floor"
    checkout = data_root / "smoke" / "aif360" / "src"
    assert_workspace_holds_the_checkout(shared_run.attack, run, checkout, (
        EDITABLE, "aif360/metrics/classification_metric.py",
        "aif360/algorithms/preprocessing/optim_preproc_helpers/data_preproc_functions.py"))
    workspace = run / "search" / "workspace"
    train = pd.read_csv(workspace / "data" / "train.csv", index_col="id")
    assert compas.LABEL in train and compas.LABEL not in pd.read_csv(workspace / "data" / "val_inputs.csv")
    # the test run trained again (no checkpoint), on the same rows, and labelled the hidden ones it was handed
    info = json.loads((run / "final" / "out" / "test" / "run_info.json").read_text())
    assert info["n_train"] == len(train) and info["n_predicted"] == \
        len(np.load(run / "final" / "out" / "test" / "predictions.npy"))


@needs_bwrap
def test_agent_code_cannot_reach_the_data_cache_or_the_hidden_labels(shared_run):
    assert_the_shared_attack_reached_nothing(shared_run)


def test_missing_data_is_one_line_before_any_step(pytester, bench, data_root):
    assert_missing_data_is_one_line(TASK, pytester, bench, data_root,
                                    "compas-scores-two-years (ProPublica's COMPAS*; 2.5 MB)")


def test_fetch_fails_closed_on_the_file_and_the_checkout_then_fetches_what_matches(pytester, shared_run, data_root):
    """ProPublica's file served from a file:// source holding other bytes is refused by its SHA-256, and a
    repository without AIF360's pinned commit by that commit; nothing is kept; with the sources' own checksum and
    commit declared, both are fetched (the editable file in the checkout)."""
    assert [a.name for a in SPEC.data] == ["compas-scores-two-years", "aif360"]
    assert_fetch_fails_closed(TASK, pytester, shared_run.fixtures, data_root)
