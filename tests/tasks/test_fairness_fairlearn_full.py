"""fairness_fairlearn_full: FML-bench's Fairness_fairlearn spec, Adult read as fetch_openml reads it and cut as the
original cuts it, the smoke run offline, the hidden test (and scikit-learn's bundled Adult rows) out of reach,
one-line preflight and the fetch failing closed."""

import gzip
import hashlib
import importlib.util
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd

from pytest_fmlbench.evalkit import SplitConfig, original_stratified_split_indices
from pytest_fmlbench.scoring.original import builtin_tasks
from pytest_fmlbench.taskkit import adult

from full_support import (Attack, FullTask, assert_fetch_fails_closed, assert_matches_original,
                          assert_missing_data_is_one_line, assert_the_shared_attack_reached_nothing,
                          assert_the_smoke_run_passed, attack_payload, data_root, needs_bwrap,
                          shared_smoke_attack_run)

TASK = FullTask("fairness_fairlearn")
SPEC = TASK.spec
SKLEARN_OPENML = Path(importlib.util.find_spec("sklearn").submodule_search_locations[0]) / "datasets/tests/data/openml"
BUNDLED_ADULT = ("id_1590/data-v1-dl-1595261.arff.gz", "id_1119/data-v1-dl-54002.arff.gz")

# Also tries scikit-learn's bundled Adult rows (labelled, perhaps hidden test rows) and reports on its own line.
BUNDLED_PROBE = r'''
import importlib.util as _util
_bundled = _Path(_util.find_spec("sklearn").submodule_search_locations[0]) / "datasets/tests/data/openml"
_read = []
for _name in BUNDLED_NAMES:
    try:
        _read += [str(_bundled / _name)] if (_bundled / _name).read_bytes() else []
    except OSError:
        pass
print("BUNDLED read:", _json.dumps(_read), flush=True)
'''.replace("BUNDLED_NAMES", repr(BUNDLED_ADULT))

# Runs when train.py imports algorithm.py, in every val and test run: it looks for the ARFF file, the hidden test
# labels and the cache's stamps, and turns leaked test labels into a perfect score.
ATTACK = Attack("algorithm.py", "from sklearn.preprocessing import StandardScaler", attack_payload(
    cache=("smoke/openml-adult-1590/adult.arff",), private=("test_labels.csv", "visible_labels.csv"),
    secrets=("adult.arff", "test_labels.csv", "visible_labels.csv", "stamp.json"),
    leaked="test_labels.csv",
    write='numpy.save(_out / "predictions.npy", numpy.loadtxt(_leak, delimiter=",", skiprows=1, usecols=1)'
          '.astype("int8"))') + BUNDLED_PROBE)
shared_run = shared_smoke_attack_run(TASK, ATTACK)


def test_the_spec_is_the_originals():
    assert_matches_original(SPEC, cpu_only=True)  # the original's fairlearn environment has no GPU library
    assert tuple(SPEC.editable) == builtin_tasks()["Fairness_fairlearn"].target_files
    assert json.loads((TASK.folder / "workspace" / "split_config.json").read_text()) == \
        {"val_ratio": 0.114, "val_seed": 42}
    assert SPEC.constraints == []  # the original scores the metric alone, with no accuracy floor
    (arff,) = SPEC.data
    # OpenML publishes the file's MD5 (md5_checksum), no SHA-256
    assert arff.sha256 is None and arff.md5 == "bb6510925e5d4b23d136715febb2cdf5"
    assert "/download/1595261/" in arff.urls[0] and arff.file_name == "adult.arff"
    assert {"sklearn:datasets/tests/data/openml/id_1590", "sklearn:datasets/tests/data/openml/id_1119"} <= \
        set(SPEC.sandbox.hide)


def _openml_cache(data_home: Path, arff: Path) -> None:
    """A scikit-learn OpenML cache holding ``arff`` as data set 1590 (adult, version 2): what fetch_openml reads
    offline. The description and features are scikit-learn's own bundled ones, the description's MD5 the file's."""
    root = data_home / "openml" / "openml.org"
    bundled = SKLEARN_OPENML / "id_1590"
    description = json.loads(gzip.decompress((bundled / "api-v1-jd-1590.json.gz").read_bytes()))
    description["data_set_description"]["md5_checksum"] = hashlib.md5(arff.read_bytes()).hexdigest()
    listing = {"data": {"dataset": [{"did": 1590, "name": "adult", "version": 2, "status": "active",
                                     "format": "ARFF"}]}}
    files = {"api/v1/json/data/list/data_name/adult/limit/2/data_version/2": json.dumps(listing).encode(),
             "api/v1/json/data/1590": json.dumps(description).encode(),
             "api/v1/json/data/features/1590": gzip.decompress((bundled / "api-v1-jdf-1590.json.gz").read_bytes()),
             "api/v1/json/data/qualities/1590": gzip.decompress((bundled / "api-v1-jdq-1590.json.gz").read_bytes()),
             "data/v1/download/1595261/adult.arff": arff.read_bytes()}
    for rel, payload in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / f"{rel}.gz").write_bytes(gzip.compress(payload))


def test_adult_is_read_and_encoded_as_the_originals_fetch_openml_call_gives_it(tmp_path):
    """prepare's features are those of the original's script: fetch_openml("adult", version=2, as_frame=True,
    parser="auto"), numeric gaps filled with medians, every categorical column one-hot with its first category
    dropped; on the fixture and on scikit-learn's bundled rows of the real file."""
    from sklearn.datasets import fetch_openml

    prepare = TASK.harness_module("prepare")
    real_rows = tmp_path / "real" / "adult.arff"
    real_rows.parent.mkdir()
    real_rows.write_bytes(gzip.decompress((SKLEARN_OPENML / BUNDLED_ADULT[0]).read_bytes()))
    fixture = tmp_path / "fixture" / "adult.arff"
    adult.write_fixture(fixture)
    for arff in (real_rows, fixture):
        _openml_cache(tmp_path / arff.parent.name / "home", arff)
        bunch = fetch_openml("adult", version=2, as_frame=True, parser="auto",
                             data_home=str(tmp_path / arff.parent.name / "home"))
        features = bunch.data.copy()
        numeric = features.select_dtypes(include=[np.number]).columns.tolist()
        features[numeric] = features[numeric].fillna(features[numeric].median())
        expected = pd.get_dummies(features, columns=features.select_dtypes(exclude=[np.number]).columns.tolist(),
                                  drop_first=True).fillna(0)
        encoded, sex, label = prepare.load(arff)
        pd.testing.assert_frame_equal(encoded, expected)
        assert sex.tolist() == bunch.data["sex"].astype(str).tolist()
        assert label.tolist() == (bunch.target == ">50K").astype(int).tolist()
    assert "sex_Male" in encoded  # sex among the baseline's inputs, as in the original


# the original's published baseline accuracies (FML-bench d336651, ml_tasks/Fairness_fairlearn/baseline_results)
PUBLISHED_ACCURACY = {"val": 0.8545123891793589, "test": 0.8525884761626207}


def test_the_cuts_are_the_originals_its_published_accuracies_are_whole_counts_of_them():
    """On Adult's 48,842 rows (11,687 above 50K), the hidden test and the default val cut have the sizes whose
    whole counts the original's published baseline accuracies are (3,759 of 4,399 val, 8,745 of 10,257 test)."""
    prepare = TASK.harness_module("prepare")
    label = np.zeros(48_842, dtype=int)
    label[np.random.default_rng(0).permutation(48_842)[:11_687]] = 1
    visible, test = prepare.cut(label)
    train, val = original_stratified_split_indices(label[visible], SplitConfig(val_ratio=0.114, val_seed=42))
    assert (len(visible), len(test), len(train), len(val)) == (38_585, 10_257, 34_186, 4_399)
    for split, n in (("val", len(val)), ("test", len(test))):
        correct = PUBLISHED_ACCURACY[split] * n
        assert abs(correct - round(correct)) < 1e-6, (split, correct)
    # stratified as the original: each part keeps the label's base rate to within a row
    assert abs(label[test].sum() - 11_687 * 0.21) <= 1 and abs(label[visible][val].mean() - 11_687 / 48_842) < 1e-3


def test_the_smoke_run_passes_offline(shared_run):
    record, run = assert_the_smoke_run_passed(TASK, shared_run)
    assert record["test_constraints"] == []
    workspace = run / "search" / "workspace"
    pool = pd.read_csv(workspace / "data" / "visible.csv.gz")
    assert "sex_Male" in pool and list(pool.columns[-2:]) == ["sex", "class"]
    assert (workspace / "model_checkpoint" / "model.pkl").is_file()


@needs_bwrap
def test_agent_code_cannot_reach_the_data_cache_the_hidden_labels_or_sklearns_adult_rows(shared_run):
    # outside the sandbox, scikit-learn's bundled rows are there to read: the probe below means something
    assert all((SKLEARN_OPENML / name).read_bytes() for name in BUNDLED_ADULT)
    _, run = assert_the_shared_attack_reached_nothing(shared_run)
    for log in ("step_0001_val.log", "final_val.log", "final_test.log"):
        (read,) = re.findall(r"^BUNDLED read: (.*)$", (run / "logs" / log).read_text(), re.MULTILINE)
        assert json.loads(read) == [], (log, read)


def test_missing_data_is_one_line_before_any_step(pytester, bench, data_root):
    assert_missing_data_is_one_line(TASK, pytester, bench, data_root,
                                    "openml-adult-1590 (UCI Adult as OpenML data set 1590*; size not published)")


def test_fetch_fails_closed_on_a_wrong_checksum_then_fetches_the_right_bytes(pytester, shared_run, data_root):
    """adult.arff served from a file:// source holding other bytes is refused by its MD5 and nothing is kept;
    with that source's own MD5 declared it is fetched, and a second fetch finds it."""
    assert_fetch_fails_closed(TASK, pytester, shared_run.fixtures, data_root)
