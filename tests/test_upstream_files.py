"""A full task's upstream files: copied from its git artefact's checkout into every fresh workspace."""

import pytest

from pytest_fmlbench.datacache import DataCache
from pytest_fmlbench.spec import load_task
from pytest_fmlbench.workspace import HarnessError, copy_upstream

from conftest import REPO

TASK = load_task(REPO / "task_suites" / "generalization_domainbed" / "full" / "task.yaml")


def checkout(root):
    src = root / "domainbed" / "src"
    for rel, text in {"domainbed/__init__.py": "", "domainbed/algorithms.py": "ERM = 1\n",
                      "domainbed/networks.py": "NET = 1\n", "domainbed/hparams_registry.py": "H = 1\n",
                      "domainbed/lib/misc.py": "M = 1\n", "domainbed/lib/__pycache__/misc.cpython-311.pyc": "x",
                      "domainbed/datasets.py": "not listed\n"}.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(text)
    return src


def test_the_listed_files_and_folders_are_copied_and_nothing_else(tmp_path):
    src = checkout(tmp_path / "cache")
    workspace = tmp_path / "workspace"
    copy_upstream(TASK, DataCache(tmp_path / "cache"), workspace)
    copied = sorted(p.relative_to(workspace).as_posix() for p in workspace.rglob("*") if p.is_file())
    assert copied == ["domainbed/__init__.py", "domainbed/algorithms.py", "domainbed/hparams_registry.py",
                      "domainbed/lib/misc.py", "domainbed/networks.py"]
    assert (workspace / "domainbed" / "algorithms.py").read_text() == (src / "domainbed" / "algorithms.py").read_text()


def test_a_listed_path_missing_from_the_checkout_is_one_line(tmp_path):
    src = checkout(tmp_path / "cache")
    (src / "domainbed" / "networks.py").unlink()
    with pytest.raises(HarnessError, match=r"domainbed has no file or folder 'domainbed/networks.py' at "):
        copy_upstream(TASK, DataCache(tmp_path / "cache"), tmp_path / "workspace")


def test_a_link_in_place_of_a_listed_file_is_refused(tmp_path):
    src = checkout(tmp_path / "cache")
    (src / "domainbed" / "networks.py").unlink()
    (src / "domainbed" / "networks.py").symlink_to("/etc/hostname")
    with pytest.raises(HarnessError, match="no file or folder 'domainbed/networks.py'"):
        copy_upstream(TASK, DataCache(tmp_path / "cache"), tmp_path / "workspace")
