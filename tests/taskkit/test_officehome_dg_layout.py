"""Dassl's office_home_dg, as the original FML-bench gave it to DomainBed: ImageFolder over each domain folder
sees the split folders train and val as its two classes, and taskkit.officehome lists it in that order."""

import zipfile
from pathlib import Path

import pytest

from pytest_fmlbench.taskkit import fixtures, officehome


def test_imagefolder_reads_office_home_dg_as_two_folder_classes_in_the_kits_order(tmp_path):
    from torchvision.datasets import ImageFolder

    archive = tmp_path / "office_home_dg.zip"
    fixtures.office_home_dg_zip(archive)
    with zipfile.ZipFile(archive) as zf:
        zf.extractall(tmp_path / "unpacked")
    # the original's setup.py: mv office_home_dg office_home; DomainBed: one ImageFolder per domain folder
    (tmp_path / "unpacked" / officehome.DASSL_DG.top).rename(tmp_path / "office_home")
    root = tmp_path / "office_home"
    envs = officehome.environments(archive, officehome.DASSL_DG)
    assert [env.name for env in envs] == sorted(p.name for p in root.iterdir() if p.is_dir()) == ["art", "clipart",
                                                                                                   "product", "real_world"]
    for env in envs:
        folder = ImageFolder(str(root / env.name))
        assert tuple(folder.classes) == env.classes == ("train", "val")  # num_classes 2, whatever the object
        assert [Path(path).relative_to(root).as_posix() for path, _ in folder.samples] == \
            [member.split("/", 1)[1] for member in env.members]
        assert tuple(folder.targets) == env.labels
        # as in Dassl's split, most images are under train/: a constant "train" scores that share
        assert env.labels.count(0) > env.labels.count(1) > 0
    fixtures.office_home_dg_zip(tmp_path / "again.zip")
    assert (tmp_path / "again.zip").read_bytes() == archive.read_bytes()


def test_the_65_class_layout_is_refused_as_office_home_dg(tmp_path):
    archive = tmp_path / "office_home.zip"
    fixtures.office_home_zip(archive)
    with pytest.raises(ValueError, match="art, clipart, product, real_world under office_home_dg/"):
        officehome.environments(archive, officehome.DASSL_DG)
