import os
import shutil

import pytest

from pytest_fmlbench.integrity import Manifest

from conftest import DATA


@pytest.fixture
def manifest(tmp_path):
    shutil.copytree(DATA / "toy_task", tmp_path / "task")
    ws = tmp_path / "task" / "workspace"
    (ws / "data" / "dev.npz").write_bytes(b"data")
    return Manifest.take(ws, ["train.py", "data/**"], tmp_path / "task" / "harness",
                         ["algorithm.py", "config.json", "split_config.json"])


def ws(manifest):
    return manifest.roots["workspace"]


def test_untouched_and_editable_changes_are_fine(manifest):
    (ws(manifest) / "algorithm.py").write_text("changed = True\n")
    (ws(manifest) / "checkpoint.pt").write_bytes(b"weights")  # artefacts are not modules
    assert manifest.verify() == []


def test_modified_deleted_and_linked_files_are_named(manifest):
    (ws(manifest) / "train.py").write_text("print('patched')\n")
    (ws(manifest) / "data" / "dev.npz").unlink()
    harness_eval = manifest.roots["harness"] / "evaluate.py"
    harness_eval.unlink()
    os.symlink("/etc/hostname", harness_eval)
    problems = manifest.verify()
    assert "protected file workspace/train.py was modified (sha256 differs)" in problems
    assert "protected file workspace/data/dev.npz was deleted" in problems
    assert "protected file harness/evaluate.py was replaced by a link to /etc/hostname" in problems


def test_new_modules_that_shadow_are_flagged(manifest):
    (ws(manifest) / "train").mkdir()
    (ws(manifest) / "train" / "__init__.py").write_text("")
    (ws(manifest) / "numpy.py").write_text("")
    (ws(manifest) / "helper.py").write_text("")
    (ws(manifest) / "__pycache__").mkdir()
    (ws(manifest) / "__pycache__" / "algorithm.cpython-311.pyc").write_bytes(b"")
    problems = manifest.verify()
    assert "new file train/__init__.py shadows protected module 'train'" in problems
    assert "new file numpy.py shadows installed module 'numpy'" in problems
    assert "new importable file helper.py is not among the task's editable files" in problems
    assert "new importable file __pycache__/algorithm.cpython-311.pyc is not among the task's editable files" in problems


def test_a_fresh_copy_is_checked_against_the_original_hashes(manifest, tmp_path):
    copy = tmp_path / "fresh"
    shutil.copytree(ws(manifest), copy)
    assert manifest.with_workspace(copy).verify() == []
    (copy / "train.py").write_text("tampered")
    assert manifest.with_workspace(copy).verify() == ["protected file workspace/train.py was modified (sha256 differs)"]
