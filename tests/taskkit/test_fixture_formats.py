"""Smoke fixtures in upstream formats: Keras's mnist.npz, and git repositories standing in for DomainBed and
privacy meter."""

import subprocess

import numpy as np
import pytest

from pytest_fmlbench.taskkit import fixtures, mnist


def test_the_mnist_fixture_reads_as_keras_mnist(tmp_path):
    path = tmp_path / "mnist.npz"
    fixtures.mnist_npz(path)
    with np.load(path) as arrays:
        assert sorted(arrays.files) == sorted(mnist.KEYS)
        assert arrays["x_train"].shape == (mnist.FIXTURE_TRAIN, 28, 28) and arrays["x_train"].dtype == np.uint8
    images, labels = mnist.read_all(path)
    assert images.shape == (mnist.FIXTURE_TRAIN + mnist.FIXTURE_TEST, 28, 28)
    assert labels.dtype == np.int64 and set(labels) == set(range(10))
    fixtures.mnist_npz(tmp_path / "again.npz")
    assert (tmp_path / "again.npz").read_bytes() == path.read_bytes()


def test_an_archive_without_mnists_arrays_is_one_line(tmp_path):
    np.savez(tmp_path / "other.npz", x_train=np.zeros((2, 28, 28), np.uint8))
    with pytest.raises(ValueError, match="other.npz: no y_train, x_test, y_test in the archive"):
        mnist.read(tmp_path / "other.npz")


def test_the_domainbed_fixture_is_a_repository_with_one_reproducible_commit(tmp_path):
    heads = []
    for name in ("one", "two"):
        fixtures.domainbed_repo(tmp_path / name)
        git = ["git", "-C", str(tmp_path / name)]
        heads.append(subprocess.run(git + ["rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout)
        assert subprocess.run(git + ["status", "--porcelain"], capture_output=True, text=True).stdout == ""
    assert heads[0] == heads[1]
    assert (tmp_path / "one" / "domainbed" / "algorithms.py").is_file()
    assert (tmp_path / "one" / "domainbed" / "lib" / "fast_data_loader.py").is_file()


def test_the_privacy_meter_fixture_is_a_repository_with_privacy_meters_trainer_and_network(tmp_path):
    fixtures.privacy_meter_repo(tmp_path / "repo")
    git = ["git", "-C", str(tmp_path / "repo")]
    assert subprocess.run(git + ["status", "--porcelain"], capture_output=True, text=True).stdout == ""
    assert (tmp_path / "repo" / "trainers" / "default_trainer.py").is_file()
    assert (tmp_path / "repo" / "models" / "wide_resnet.py").is_file()
    assert not (tmp_path / "repo" / "models" / "__init__.py").exists()  # the task's workspace brings its own
