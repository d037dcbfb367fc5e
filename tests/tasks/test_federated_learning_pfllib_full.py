"""federated_learning_pfllib_full: FML-bench's Federated_Learning_PFLlib spec and protocol, PFLlib's own generator
making the partition, its smoke run offline, the hidden labels out of agent code's reach, one-line preflight, fetch
failing closed."""

import json
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
import yaml

from pytest_fmlbench.spec import TaskSpec
from pytest_fmlbench.taskkit import fixtures, gitrepo, pfllib
from pytest_fmlbench.scoring.original import builtin_tasks

from conftest import REPO
from full_support import (Attack, FullTask, assert_fetch_fails_closed, assert_matches_original,
                          assert_missing_data_is_one_line, assert_the_shared_attack_reached_nothing,
                          assert_the_smoke_run_passed, attack_payload, data_root, fmlbench, needs_bwrap,
                          shared_smoke_attack_run)

TASK = FullTask("federated_learning_pfllib")
SPEC: TaskSpec = TASK.spec
STANDIN = REPO / "pytest_fmlbench" / "taskkit" / "standins" / "pfllib"

# the original's setup pins PFLlib by this abbreviated commit
ORIGINAL_PIN = "0169ba7"

# Runs when train.py imports algorithm.py, in every val and test run: it looks for the CIFAR-10 archive, PFLlib's
# checkout, the partition and the test labels in the private folder and the cache's stamps, and turns leaked
# test labels into the predictions.
ATTACK = Attack("algorithm.py", "import copy", attack_payload(
    cache=("smoke/cifar-10-python/cifar-10-python.tar.gz", "smoke/pfllib/src"),
    private=("test_labels.npy", "pfllib_partition"),
    secrets=("cifar-10-python.tar.gz", "test_labels.npy", "0.npz", "stamp.json"),
    leaked="test_labels.npy", write='numpy.save(_out / "predictions.npy", numpy.load(_leak))'))
shared_run = shared_smoke_attack_run(TASK, ATTACK)


def harness(script: str, *args, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(TASK.folder / "harness" / script), *map(str, args)],
                          capture_output=True, text=True, cwd=cwd)


def test_the_spec_is_the_originals():
    assert_matches_original(SPEC)
    # the original's target files are FML-bench's own algorithm.py and split_config.json, in the task's workspace
    assert tuple(SPEC.editable) == builtin_tasks()[SPEC.original.task].target_files
    assert all((TASK.folder / "workspace" / path).is_file() for path in SPEC.editable)
    (checkout,) = [a for a in SPEC.data if a.kind == "git"]
    assert checkout.commit == SPEC.original.pinned_commit and checkout.commit.startswith(ORIGINAL_PIN)
    assert checkout.urls == ["https://github.com/TsingZ0/PFLlib.git"] and not SPEC.upstream
    assert SPEC.constraints == []
    # the original's split_config.json
    assert json.loads((TASK.folder / "workspace" / "split_config.json").read_text()) == {"val_ratio": 0.3,
                                                                                          "val_seed": 42}


def test_normalised_pixels_come_back_bit_for_bit():
    pixels = np.arange(256, dtype=np.uint8).repeat(12).reshape(-1, 3, 32, 32)
    floats = pfllib.normalise(pixels)
    assert floats.dtype == np.float32 and floats.min() == -1.0 and floats.max() == 1.0
    assert np.array_equal(pfllib.to_uint8(floats), pixels)
    with pytest.raises(ValueError, match="not CIFAR-10's pixels"):
        pfllib.to_uint8(floats + np.float32(1e-3))


def test_the_generator_runs_from_the_checkout_and_leaves_it_and_this_process_as_they_were(tmp_path, monkeypatch):
    import torchvision.datasets

    fixtures.cifar10_python(tmp_path / "cifar-10-python.tar.gz")
    checkout = tmp_path / "checkout"
    gitrepo.write_repository(checkout, STANDIN, "PFLlib stand-in")
    monkeypatch.chdir(tmp_path)
    before = (list(sys.argv), list(sys.path), torchvision.datasets.CIFAR10)
    folder = pfllib.generate(checkout, tmp_path / "cifar-10-python.tar.gz", tmp_path / "work")
    assert (list(sys.argv), list(sys.path), torchvision.datasets.CIFAR10) == before and "utils" not in sys.modules
    status = subprocess.run(["git", "-C", str(checkout), "status", "--porcelain", "--ignored"], capture_output=True,
                            text=True, check=True)
    assert status.stdout == ""  # nothing written into the checkout, not even bytecode
    # every one of the 240 fixture images went to one client, 75% of each client's share to its train part
    sizes = [(len(pfllib.read_client(folder, "train", c)[1]), len(pfllib.read_client(folder, "test", c)[1]))
             for c in range(pfllib.NUM_CLIENTS)]
    assert sum(a + b for a, b in sizes) == 240 and all(b <= a for a, b in sizes)


def test_prepare_hands_over_the_generators_train_parts_and_keeps_its_test_parts(tmp_path):
    cache = tmp_path / "cache"
    fixtures.cifar10_python(cache / "cifar-10-python" / "cifar-10-python.tar.gz")
    gitrepo.write_repository(cache / "pfllib" / "src", STANDIN, "PFLlib stand-in")
    workspace, private, out = tmp_path / "workspace", tmp_path / "private", tmp_path / "out"
    done = harness("prepare.py", "--split", "val", "--workspace", workspace, "--private", private, "--data", cache)
    assert done.returncode == 0, done.stderr
    # the test split reads the partition made for val: the checkout is no longer needed
    shutil.rmtree(cache / "pfllib")
    done = harness("prepare.py", "--split", "test", "--private", private, "--out", out, "--data", cache)
    assert done.returncode == 0, done.stderr
    folder = private / "pfllib_partition" / "Cifar10"
    data = workspace / "data"
    for part, images, labels, owners in (
            ("train", data / "visible_images.npy", data / "visible_labels.npy", data / "visible_client.npy"),
            ("test", out / "test_images.npy", private / "test_labels.npy", out / "test_client.npy")):
        shown, labels, owners = np.load(images), np.load(labels), np.load(owners)
        for client in range(pfllib.NUM_CLIENTS):
            x, y = pfllib.read_client(folder, part, client)
            assert np.array_equal(pfllib.normalise(shown[owners == client]), x)
            assert np.array_equal(labels[owners == client], y)
        assert (np.diff(owners) >= 0).all()  # client after client
    assert np.array_equal(np.load(private / "visible_labels.npy"), np.load(data / "visible_labels.npy"))
    assert {p.name for p in out.iterdir()} == {"test_images.npy", "test_client.npy"}


def test_the_evaluator_averages_the_clients_accuracies_on_the_val_cuts_of_split_config(tmp_path):
    workspace, out, private = tmp_path / "workspace", tmp_path / "out", tmp_path / "private"
    for folder in (workspace, out, private):
        folder.mkdir()
    (workspace / "split_config.json").write_text(json.dumps({"val_ratio": 0.5, "val_seed": 7}))
    owners = np.repeat(np.arange(20), 4)
    owners[owners == 19] = 0  # client 19 has no images: it is left out, as the original's evaluate leaves it
    labels = np.arange(len(owners)) % 10
    np.save(private / "visible_client.npy", owners)
    np.save(private / "visible_labels.npy", labels)
    # the original's cut, per client: RandomState(val_seed).permutation, the first int(val_ratio * n)
    scored = []
    for client in range(20):
        mine = np.flatnonzero(owners == client)
        scored += mine[np.random.RandomState(7).permutation(len(mine))[:int(0.5 * len(mine))]].tolist()
    predictions = labels[scored].copy()
    first = owners[scored] == 0
    predictions[first] = (predictions[first] + 1) % 10  # client 0 all wrong
    np.save(out / "predictions.npy", predictions)
    done = harness("evaluate.py", "--split", "val", "--workspace", workspace, "--out", out, "--private", private,
                   "--result", tmp_path / "r.json")
    assert done.returncode == 0, done.stderr
    result = json.loads((tmp_path / "r.json").read_text())
    accuracies = [0.0] + [1.0] * 18
    assert result["info"]["client_accuracies"] == accuracies
    assert result["datasets"]["cifar10_fl"]["means"] == {"test_acc_mean": pytest.approx(np.mean(accuracies)),
                                                         "test_acc_std_mean": pytest.approx(np.std(accuracies))}
    np.save(out / "predictions.npy", predictions[:5])
    done = harness("evaluate.py", "--split", "val", "--workspace", workspace, "--out", out, "--private", private,
                   "--result", tmp_path / "r.json")
    assert done.returncode == 1 and done.stderr.strip() == \
        f"evaluate.py: predictions.npy has shape (5,), expected ({len(scored)},)", done.stderr


def test_train_py_keeps_the_twenty_clients(tmp_path):
    workspace = tmp_path / "workspace"
    shutil.copytree(TASK.folder / "workspace", workspace)
    algorithm = workspace / "algorithm.py"
    algorithm.write_text(algorithm.read_text().replace('"num_clients": 20', '"num_clients": 10'))
    done = subprocess.run([sys.executable, "train.py", "--split", "val", "--out", str(tmp_path / "out")],
                          cwd=workspace, capture_output=True, text=True)
    assert done.returncode == 1 and done.stderr.strip() == \
        "train.py: num_clients must be 20 (fixed by the data partition), get_fl_config() says 10", done.stderr


def test_the_smoke_run_passes_offline_on_pfllibs_partition(shared_run):
    record, run = assert_the_smoke_run_passed(TASK, shared_run)
    val_log = (run / "logs" / "step_0001_val.log").read_text()
    assert "Starting federated training: 2 rounds, 20 clients" in val_log, val_log
    # the driver's own evaluate() on the val cuts after the last round, and the evaluator's score of its labels
    (last,) = re.findall(r"Round 1: avg_acc=([0-9.]+)", val_log)
    assert float(last) == round(record["best_val"], 4)
    test_log = (run / "logs" / "final_test.log").read_text()
    assert "test images labelled" in test_log and "Starting federated training" not in test_log, test_log


@needs_bwrap
def test_agent_code_cannot_reach_the_data_cache_or_the_labels(shared_run):
    assert_the_shared_attack_reached_nothing(shared_run)


def test_missing_data_is_one_line_before_any_step(pytester, bench, data_root):
    assert_missing_data_is_one_line(TASK, pytester, bench, data_root, "cifar-10-python (CIFAR-10*; 170.5 MB)")


def test_fetch_fails_closed_then_fetches_the_archive(pytester, shared_run, data_root):
    """The archive, served from a file:// source holding other bytes, is refused and nothing is kept; with that
    source's own checksum declared it is fetched."""
    assert_fetch_fails_closed(TASK, pytester, shared_run.fixtures, data_root, only=("cifar-10-python",))


def test_fetch_refuses_pfllib_at_another_commit_then_checks_out_its_own(pytester, shared_run, data_root):
    """PFLlib comes from a fixture repository: the pinned commit, which it does not hold, is refused and nothing
    kept; declared at the fixture's own commit, it is checked out with the generator the harness runs."""
    args = assert_fetch_fails_closed(TASK, pytester, shared_run.fixtures, data_root, only=("pfllib",), then_fetch=False)
    task_yaml = pytester.path / "task_suites" / TASK.small_id / "full" / "task.yaml"
    spec = yaml.safe_load(task_yaml.read_text())
    stamp = json.loads((shared_run.fixtures / "pfllib" / "stamp.json").read_text())
    spec["data"][0]["commit"] = stamp["commit"]
    task_yaml.write_text(yaml.safe_dump(spec))
    done = fmlbench(*args)
    assert done.returncode == 0 and "pfllib: fetched" in done.stdout, done.stdout + done.stderr
    assert (data_root / "pfllib" / "src" / pfllib.GENERATOR).is_file()
