"""OfficeHome read from its archive in DomainBed's order (torchvision's ImageFolder over the unpacked domains),
its fixture in the archive's layout, and the weights fixture in the .pth format."""

import zipfile
from pathlib import Path

import numpy as np
import pytest

from pytest_fmlbench.taskkit import fixtures, officehome
from pytest_fmlbench.taskkit.officehome import _jpeg


def unpacked_order(archive, root):
    """What DomainBed sees: the archive unpacked, every domain folder read by ImageFolder."""
    from torchvision.datasets import ImageFolder

    with zipfile.ZipFile(archive) as zf:
        zf.extractall(root)
    top = root / officehome.TOP
    found = []
    for domain in sorted(p.name for p in top.iterdir() if p.is_dir()):
        folder = ImageFolder(str(top / domain))
        members = tuple(f"{officehome.TOP}/{domain}/" + Path(path).relative_to(top / domain).as_posix()
                        for path, _ in folder.samples)
        found.append((domain, tuple(folder.classes), members, tuple(folder.targets)))
    return found


def as_tuples(archive):
    return [(env.name, env.classes, env.members, env.labels) for env in officehome.environments(archive)]


def test_the_fixture_reads_in_imagefolders_order_and_is_reproducible(tmp_path):
    archive = tmp_path / "office_home.zip"
    fixtures.office_home_zip(archive)
    envs = officehome.environments(archive)
    assert [env.name for env in envs] == list(officehome.DOMAINS)  # Art is environment 0
    assert all(len(env.classes) == officehome.FIXTURE_CLASSES
               and len(env.members) == officehome.FIXTURE_CLASSES * officehome.FIXTURE_PER_CLASS for env in envs)
    assert as_tuples(archive) == unpacked_order(archive, tmp_path / "unpacked")
    fixtures.office_home_zip(tmp_path / "again.zip")
    assert (tmp_path / "again.zip").read_bytes() == archive.read_bytes()


def test_nested_folders_mixed_case_extensions_and_other_files_sort_as_imagefolder_sorts_them(tmp_path):
    archive = tmp_path / "odd.zip"
    rng = np.random.default_rng(0)
    names = ["Mug/b.jpg", "Mug/A.JPG", "Mug/sub/a.jpg", "Mug/sub-b/0.png", "Mug/a.txt", "Mug/_x.jpeg",
             "Bed/z.jpg", "Bed/Z.jpg", "TV/1.jpg", "Table/1.jpg"]
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr(f"{officehome.TOP}/ImageInfo.csv", "not a domain")
        for domain in officehome.DOMAINS:
            for name in names:
                zf.writestr(f"{officehome.TOP}/{domain}/{name}", _jpeg(rng, 1, 0))
    assert as_tuples(archive) == unpacked_order(archive, tmp_path / "unpacked")


def test_an_archive_without_the_four_domains_is_one_line(tmp_path):
    archive = tmp_path / "other.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr(f"{officehome.TOP}/Art/Mug/1.jpg", b"")
    with pytest.raises(ValueError, match="expected the domain folders Art, Clipart, Product, Real World .* found Art$"):
        officehome.environments(archive)


def test_the_weights_fixture_is_a_state_dict_torch_loads_safely(tmp_path):
    import torch

    path = tmp_path / "resnet50-0676ba61.pth"
    fixtures.torch_checkpoint(path)
    state = torch.load(path, weights_only=True)
    assert set(state) == {"conv1.weight", "fc.weight", "fc.bias"} and state["fc.weight"].shape == (2, 4)
