"""data_efficiency_easyfsl_full: FML-bench's Data_Efficiency_easyfsl spec, easyfsl's files in the workspace, its
smoke run offline (the real feature extraction and episodes), the test episodes and their labels out of reach,
the unpinned archive and weights refused until the user pins them, and the archive checked against easyfsl's
split CSV."""

import hashlib
import json
import re
import subprocess
import sys
import zipfile

import numpy as np
import pytest
import yaml

from full_support import (Attack, FullTask, assert_edits_the_originals_checkout, assert_fetch_fails_closed,
                          assert_matches_original, assert_other_data_are_not_resumed,
                          assert_the_shared_attack_reached_nothing, assert_the_smoke_run_passed,
                          assert_workspace_holds_the_checkout, attack_payload, copy_task, data_root, fmlbench,
                          needs_bwrap, shared_smoke_attack_run)
from pytest_fmlbench.datacache.pins import PINS_ENV
from pytest_fmlbench.taskkit import mini_imagenet

TASK = FullTask("data_efficiency_easyfsl")
SPEC = TASK.spec
UNPUBLISHED = ("mini-imagenet", "feat-resnet12-mini-imagenet")

# Runs when train.py imports easyfsl's methods, in every val and test run: it looks for the image archive, the
# weights, the features computed from them, the harness (which holds the episodes' seeds), the test queries'
# labels and the cache's stamps, and turns leaked test labels into a perfect score.
ATTACK = Attack("easyfsl/methods/prototypical_networks.py", "from torch import Tensor", attack_payload(
    cache=("smoke/mini-imagenet/miniimagenet.zip", "smoke/feat-resnet12-mini-imagenet", "smoke/derived",
           "smoke/easy-few-shot-learning/src"),
    harness=("prepare.py",), private=("test_query_labels.npy", "val_query_labels.npy"),
    secrets=("miniimagenet.zip", "feat_resnet12_mini_imagenet.pth", "test_query_labels.npy", "val_query_labels.npy",
             "test.csv", "stamp.json"),
    leaked="test_query_labels.npy", write='numpy.save(_out / "predictions.npy", numpy.load(_leak).reshape(-1))'))
shared_run = shared_smoke_attack_run(TASK, ATTACK)


def test_the_spec_is_the_originals():
    assert_matches_original(SPEC)
    assert_edits_the_originals_checkout(SPEC)  # easyfsl's few_shot_classifier.py and prototypical_networks.py
    assert SPEC.constraints == [] and "split_config.json" not in SPEC.editable  # the original's episodes are fixed
    assert [a.name for a in SPEC.data if a.unpublished] == list(UNPUBLISHED)
    assert all(a.why and a.sha256 is None and a.md5 is None for a in SPEC.data if a.unpublished)
    prepare = (TASK.folder / "harness" / "prepare.py").read_text()
    # the original's eval.py: seeds 42 (val) and 43 (test), 5 ways, 1 shot, 15 queries, 1,000 episodes
    assert 'SEEDS = {"val": 42, "test": 43}' in prepare and "N_WAY, N_SHOT = 5, 1" in prepare
    assert '"full": (15, 1000)' in prepare
    assert "SAME pool" in SPEC.description  # the shared pool is said, as the original's is


@pytest.fixture
def checkout_imports():
    """draw_episodes imports easyfsl from a checkout: this process's path and easyfsl modules are put back after."""
    path, modules = list(sys.path), {k: v for k, v in sys.modules.items() if k.split(".")[0] == "easyfsl"}
    yield
    sys.path[:] = path
    for name in [k for k in sys.modules if k.split(".")[0] == "easyfsl"]:
        del sys.modules[name]
    sys.modules.update(modules)


def test_the_episodes_are_the_ones_benchmark_methods_draws(tmp_path, checkout_imports):
    """draw_episodes gives, as indices, exactly the episodes easyfsl's DataLoader over its TaskSampler yields after
    benchmark_methods' seeding, with the sampler's own episode labels."""
    import random

    import pandas as pd
    import torch
    from torch.utils.data import DataLoader

    mini_imagenet.write_repository_fixture(tmp_path / "easyfsl")
    checkout = tmp_path / "easyfsl"
    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(20), 20)
    rng.shuffle(labels)
    embeddings = rng.normal(size=(len(labels), 8)).astype(np.float32)
    episodes = mini_imagenet.draw_episodes(embeddings, labels, checkout, seed=42, n_way=5, n_shot=1, n_query=15,
                                           n_tasks=30)

    from easyfsl.datasets import FeaturesDataset  # the checkout's, as draw_episodes imported it
    from easyfsl.samplers import TaskSampler

    assert TaskSampler.__module__ == "easyfsl.samplers.task_sampler"
    dataset = FeaturesDataset.from_dataframe(pd.DataFrame({"embedding": list(embeddings), "class_name": labels}))
    np.random.seed(42)
    torch.manual_seed(42)
    random.seed(42)
    sampler = mini_imagenet._constructible(TaskSampler)(dataset, n_way=5, n_shot=1, n_query=15, n_tasks=30)
    loader = DataLoader(dataset, batch_sampler=sampler, num_workers=0, collate_fn=sampler.episodic_collate_fn)
    for index, (support, support_labels, query, query_labels, _) in enumerate(loader):
        assert np.array_equal(embeddings[episodes["support"][index]], support.numpy())
        assert np.array_equal(embeddings[episodes["query"][index]], query.numpy())
        assert np.array_equal(episodes["support_labels"][index], support_labels.numpy())
        assert np.array_equal(episodes["query_labels"][index], query_labels.numpy())
    assert index == 29


def test_the_smoke_run_passes_offline_on_easyfsls_files(shared_run, tmp_path):
    data_root = shared_run.data_root
    _, run = assert_the_smoke_run_passed(TASK, shared_run)
    # the workspace holds the checkout's files (the smoke stand-in's), and train.py ran them on the episodes
    checkout = data_root / "smoke" / "easy-few-shot-learning" / "src"
    assert_workspace_holds_the_checkout(shared_run.attack, run, checkout, (
        "easyfsl/methods/prototypical_networks.py", "easyfsl/methods/few_shot_classifier.py",
        "scripts/methods_configs.json"))
    assert "val: 4 episodes of 15 queries" in (run / "logs" / "step_0001_val.log").read_text()
    workspace = run / "search" / "workspace"
    features = np.load(workspace / "data" / "features.npy")
    assert features.shape == (mini_imagenet.FIXTURE_CLASSES * mini_imagenet.FIXTURE_IMAGES_PER_CLASS, 640)
    assert not (workspace / "data" / "test_episodes.npz").exists()
    # the features were computed once for this cache and are reused: one file, named after its sources
    (derived,) = (data_root / "smoke" / "derived").glob("*.npz")
    with np.load(derived) as saved:
        assert np.array_equal(saved["embeddings"], features)
    assert_other_data_are_not_resumed(TASK, shared_run, "mini-imagenet", tmp_path)


@needs_bwrap
def test_agent_code_cannot_reach_the_data_cache_or_the_test_episodes(shared_run):
    assert_the_shared_attack_reached_nothing(shared_run)


def test_an_unpinned_artefact_is_one_line_before_any_step(pytester, bench, data_root, monkeypatch):
    monkeypatch.delenv(PINS_ENV, raising=False)
    copy_task(pytester, TASK.small_id)
    result = bench("--agent=baseline", "--steps=1", "-m", "full", "task_suites")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([f"*{TASK.id}: mini-imagenet (mini-ImageNet images*; size not published) has no "
                                 f"published checksum and is not pinned in the data cache {data_root}: run "
                                 f"`fmlbench data fetch -k {TASK.id} --pin-unpublished` to download it and pin the "
                                 f"SHA-256 it has, or set {PINS_ENV} to a file of shared pins*"])
    assert not (pytester.path / "reports" / "fmlbench" / "runs" / TASK.id).exists()
    result = bench("--agent=baseline", "--steps=1", "-m", "full", "--scale=smoke", "task_suites")
    result.stdout.fnmatch_lines([f"*is not in the data cache {data_root / 'smoke'}: "
                                 f"run `fmlbench data fixtures -k {TASK.id}`*"])


def test_fetch_fails_closed_on_easyfsls_commit(pytester, shared_run, data_root):
    """easyfsl comes from a fixture repository: a commit it does not hold is refused, its own is checked out."""
    assert_fetch_fails_closed(TASK, pytester, shared_run.fixtures, data_root, only=("easy-few-shot-learning",))


def _served_from_fixtures(pytester, tmp_path, shared_run):
    """The task's project with its unpublished artefacts served from file:// copies of the smoke fixtures, and
    easyfsl from the fixture repository at its own commit; returns the fetch command and the served files. The
    fixtures are those ``fmlbench data fixtures`` wrote for the module's smoke run (its data cache holds them as
    written; every fetch here reads them, none writes there), not a second set written alike."""
    copy_task(pytester, TASK.small_id)
    full = pytester.path / "task_suites" / TASK.small_id / "full"
    fixtures = shared_run.data_root / "smoke"
    spec = yaml.safe_load((full / "task.yaml").read_text())
    served = {}
    for entry in spec["data"]:
        if entry["name"] in UNPUBLISHED:
            source = tmp_path / "served" / entry["filename"]
            source.parent.mkdir(exist_ok=True)
            source.write_bytes((fixtures / entry["name"] / entry["filename"]).read_bytes())
            served[entry["name"]] = source
            entry["urls"] = [source.as_uri()]
        else:
            entry["urls"] = [(fixtures / entry["name"] / "src").as_uri()]
            entry["commit"] = json.loads((fixtures / entry["name"] / "stamp.json").read_text())["commit"]
    (full / "task.yaml").write_text(yaml.safe_dump(spec))
    return ("data", "fetch", "-k", TASK.id, "--suite", str(pytester.path / "task_suites")), served


def test_fetch_refuses_the_unpublished_artefacts_until_pinned_then_holds_them_to_the_pin(pytester, tmp_path,
                                                                                          data_root, monkeypatch,
                                                                                          shared_run):
    monkeypatch.delenv(PINS_ENV, raising=False)
    args, served = _served_from_fixtures(pytester, tmp_path, shared_run)
    done = fmlbench(*args)
    assert done.returncode == 1, done.stdout + done.stderr
    accept = f"fmlbench data fetch -k {TASK.id} --suite {pytester.path / 'task_suites'} --pin-unpublished"
    for name in UNPUBLISHED:
        (line,) = [line for line in done.stdout.splitlines() if line.startswith(f"{name}: ")]
        assert "refused: no checksum is published" in line and line.endswith(f"run `{accept}`"), line
        assert {p.name for p in (data_root / name).iterdir()} <= {".lock"}
    assert "easy-few-shot-learning: fetched" in done.stdout

    done = fmlbench(*args, "--pin-unpublished")
    assert done.returncode == 0, done.stdout + done.stderr
    for name, source in served.items():
        digest = hashlib.sha256(source.read_bytes()).hexdigest()
        assert re.search(rf"^{name}: pinned: sha256 {digest}, {source.stat().st_size} bytes", done.stdout, re.M), \
            done.stdout
    assert fmlbench(*args).returncode == 0  # cached, held to the pins

    # the host now serves other weights, and the cached copy is gone: the next fetch keeps nothing of them
    weights = served["feat-resnet12-mini-imagenet"]
    pinned = hashlib.sha256(weights.read_bytes()).hexdigest()
    (data_root / "feat-resnet12-mini-imagenet" / weights.name).write_bytes(b"other weights")
    original = weights.read_bytes()
    weights.write_bytes(original[:-1] + bytes([original[-1] ^ 1]))
    done = fmlbench(*args, "--pin-unpublished")
    assert done.returncode == 1 and f"expected {pinned}" in done.stdout and "to pin anew" in done.stdout, done.stdout
    listing = fmlbench("data", "list", "-k", TASK.id, "--suite", str(pytester.path / "task_suites")).stdout
    assert re.search(r"^  feat-resnet12-mini-imagenet +size not published  not cached", listing, re.M), listing


def test_a_shared_pin_file_makes_the_first_fetch_fail_closed_on_other_bytes(pytester, tmp_path, data_root,
                                                                            monkeypatch, shared_run):
    args, served = _served_from_fixtures(pytester, tmp_path, shared_run)
    archive = served["mini-imagenet"]
    genuine = hashlib.sha256(archive.read_bytes()).hexdigest()
    pins = tmp_path / "lab-pins.txt"
    pins.write_text(f"mini-imagenet {genuine} {archive.stat().st_size}\n"
                    f"feat-resnet12-mini-imagenet {'0' * 64} {served['feat-resnet12-mini-imagenet'].stat().st_size}\n")
    monkeypatch.setenv(PINS_ENV, str(pins))
    done = fmlbench(*args, "--pin-unpublished")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "mini-imagenet: fetched" in done.stdout  # the lab's bytes
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("feat-resnet12-mini-imagenet: ")]
    assert "failed" in line and f"expected {'0' * 64}" in line and "nothing kept" in line, line
    assert {p.name for p in (data_root / "feat-resnet12-mini-imagenet").iterdir()} <= {".lock"}
    stamp = json.loads((data_root / "mini-imagenet" / "stamp.json").read_text())
    assert stamp["sha256"] == genuine and stamp["pinned"] == f"shared pin {pins}:1"


def test_an_archive_lacking_a_listed_image_is_one_line(tmp_path):
    """The archive must hold every image easyfsl's test.csv lists, where the original's unzip puts them."""
    mini_imagenet.write_repository_fixture(tmp_path / "easyfsl")
    rows = mini_imagenet.test_split(tmp_path / "easyfsl")
    assert len(rows) == mini_imagenet.FIXTURE_CLASSES * mini_imagenet.FIXTURE_IMAGES_PER_CLASS
    whole = tmp_path / "miniimagenet.zip"
    mini_imagenet.write_archive_fixture(whole)
    mini_imagenet.check_images(whole, rows)
    lacking = tmp_path / "lacking.zip"
    dropped = f"{rows[7][0]}/{rows[7][1]}"
    with zipfile.ZipFile(whole) as src, zipfile.ZipFile(lacking, "w") as dst:
        for info in src.infolist():
            if info.filename != dropped:
                dst.writestr(info, src.read(info))
    with pytest.raises(mini_imagenet.DataProblem) as problem:
        mini_imagenet.check_images(lacking, rows)
    assert str(problem.value) == (f"lacking.zip lacks 1 of the {len(rows)} images ({mini_imagenet.FIXTURE_CLASSES} "
                                  f"classes) that easyfsl's data/mini_imagenet/test.csv lists (first: {dropped}): it "
                                  "is not the archive the original unzips into data/mini_imagenet/images")


def test_prepare_refuses_an_archive_in_another_layout_in_one_line(tmp_path):
    """A zip whose images sit under a wrapping folder is not what the original reads: prepare ends in one line
    before computing anything."""
    data = tmp_path / "data"
    mini_imagenet.write_repository_fixture(data / "easy-few-shot-learning" / "src")
    (data / "mini-imagenet").mkdir(parents=True)
    with zipfile.ZipFile(data / "mini-imagenet" / "miniimagenet.zip", "w") as zf:
        for class_name, image_name in mini_imagenet.fixture_rows():
            zf.writestr(f"images/{class_name}/{image_name}", b"")
    done = subprocess.run([sys.executable, str(TASK.folder / "harness" / "prepare.py"), "--split", "val",
                           "--workspace", str(tmp_path / "ws"), "--private", str(tmp_path / "private"),
                           "--data", str(data), "--scale", "smoke"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 1 and done.stderr.count("\n") == 1, done.stderr
    images = mini_imagenet.FIXTURE_CLASSES * mini_imagenet.FIXTURE_IMAGES_PER_CLASS
    assert done.stderr.startswith(f"prepare.py: miniimagenet.zip lacks {images} of the {images} images"), done.stderr
    assert not (data / "derived").exists()
