"""OfficeHome as DomainBed reads it, straight from a zip archive, in two layouts, and each archive's fixture.

DomainBed's ``MultipleEnvironmentImageFolder`` takes every folder under ``office_home/`` as an environment,
in sorted order, and reads each with torchvision's ``ImageFolder``: classes are the sorted sub-folder names,
images are walked recursively in sorted order and kept when their extension is an image's.
:func:`environments` lists an archive's members in exactly that order, so that indices, and DomainBed's
seeded holdout split over them, match what DomainBed's own code builds from the same archive.

Two archives, two different tasks:

* ``DOMAINBED``: ``OfficeHomeDataset_10072016.zip``, which DomainBed's download script fetches and renames
  to ``office_home``: ``<domain>/<class>/`` for Art, Clipart, Product, Real World; 65 classes.
* ``DASSL_DG``: Dassl's ``office_home_dg.zip``, which the original FML-bench's setup.py fetches (Drive id
  1gkbf_Kax...) and renames from ``office_home_dg`` to ``office_home``: ``<domain>/{train,val}/<class>/``
  for art, clipart, product, real_world. DomainBed's ImageFolder sees the two folders ``train`` and ``val``
  as the classes: two classes, whatever the object is. The original's published baseline measures that.
"""

from __future__ import annotations

import io
import json
import posixpath
import shutil
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import domainbed

# torchvision.datasets.folder.IMG_EXTENSIONS, compared lower-cased as ImageFolder does
IMG_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")


@dataclass(frozen=True)
class Layout:
    """One archive of OfficeHome: its top folder and domain folders (DomainBed's environment order)."""

    top: str
    domains: tuple[str, ...]


DOMAINBED = Layout("OfficeHomeDataset_10072016", ("Art", "Clipart", "Product", "Real World"))
DASSL_DG = Layout("office_home_dg", ("art", "clipart", "product", "real_world"))
# Dassl's split folders, which DomainBed's ImageFolder takes for classes
DG_SPLITS = ("train", "val")
TOP, DOMAINS = DOMAINBED.top, DOMAINBED.domains


@dataclass(frozen=True)
class Environment:
    name: str
    classes: tuple[str, ...]
    members: tuple[str, ...]  # archive member names, in ImageFolder's order
    labels: tuple[int, ...]


def environments(archive: Path, layout: Layout = DOMAINBED) -> list[Environment]:
    """The archive's domains in DomainBed's order, each with its images in ImageFolder's order."""
    top, domains = layout.top, layout.domains
    with zipfile.ZipFile(archive) as zf:
        names = zf.namelist()
    folders: dict[str, set[str]] = {}
    files: dict[tuple[str, str], list[tuple[str, str, str]]] = {}
    for name in names:
        parts = name.split("/")
        if parts[0] != top or len(parts) < 3:
            continue
        domain = parts[1]
        folders.setdefault(domain, set())
        if len(parts) == 3:
            continue  # a file (or the folder entry itself) directly in the domain folder: not a class
        folders[domain].add(parts[2])
        if not name.endswith("/") and name.lower().endswith(IMG_EXTENSIONS):
            files.setdefault((domain, parts[2]), []).append((posixpath.dirname(name), parts[-1], name))
    if tuple(sorted(folders)) != domains:
        raise ValueError(f"{archive}: expected the domain folders {', '.join(domains)} under {top}/, "
                         f"found {', '.join(sorted(folders)) or 'none'}")
    found = []
    for domain in sorted(folders):
        classes = tuple(sorted(folders[domain]))
        members, labels = [], []
        for label, name in enumerate(classes):
            # sorted(os.walk(class folder)) then sorted(file names): by folder path, then by name
            for _, _, member in sorted(files.get((domain, name), [])):
                members.append(member)
                labels.append(label)
        found.append(Environment(domain, classes, tuple(members), tuple(labels)))
    return found


# --- fixture ------------------------------------------------------------------------------------------------

# few images: DomainBed's augmentation (colour jitter at 224 x 224) costs about 40 ms of processor time an image,
# and its loop evaluates every training split at the first and the last step, in the search step's val run and
# again in the final one; three classes still make the classifier's argmax a choice and leave each domain's cut
# (30% held out) both parts
FIXTURE_CLASSES = 3
FIXTURE_PER_CLASS = 3  # images per class and domain


def _jpeg(rng: np.random.Generator, label: int, domain: int) -> bytes:
    from PIL import Image

    height, width = int(rng.integers(20, 36)), int(rng.integers(20, 36))
    tint = np.array([label * 3 % 256, (label * 7 + 60 * domain) % 256, (255 - label * 3) % 256], dtype=np.float64)
    pixels = np.clip(rng.integers(0, 64, size=(height, width, 3)) + tint * 0.75, 0, 255).astype(np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="JPEG", quality=85)
    return buffer.getvalue()


def write_fixture(path: Path) -> None:
    """``OfficeHomeDataset_10072016.zip`` in its layout: ``<top>/<domain>/<class>/<nnnnn>.jpg`` for the four
    domains, a few classes of three tiny JPEGs of varying size per domain, and a non-image file in a
    class folder, which ImageFolder skips."""
    rng = np.random.default_rng(65)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_STORED) as zf:
        for domain_index, domain in enumerate(DOMAINS):
            for label in range(FIXTURE_CLASSES):
                folder = f"{TOP}/{domain}/class_{label:02d}"
                for index in range(FIXTURE_PER_CLASS):
                    info = zipfile.ZipInfo(f"{folder}/{index + 1:05d}.jpg", date_time=(2016, 10, 7, 0, 0, 0))
                    zf.writestr(info, _jpeg(rng, label, domain_index))
            zf.writestr(zipfile.ZipInfo(f"{TOP}/{domain}/class_00/Thumbs.db", date_time=(2016, 10, 7, 0, 0, 0)),
                        b"not an image")
    tmp.replace(path)


def write_dg_fixture(path: Path) -> None:
    """Dassl's ``office_home_dg.zip`` in its layout: ``office_home_dg/<domain>/{train,val}/<class>/<name>.jpg``,
    a few classes per domain with more images under ``train`` than under ``val``, as in Dassl's split."""
    rng = np.random.default_rng(2)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    per_split = {"train": FIXTURE_PER_CLASS, "val": 1}
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_STORED) as zf:
        for domain_index, domain in enumerate(DASSL_DG.domains):
            for split in DG_SPLITS:
                for label in range(FIXTURE_CLASSES):
                    folder = f"{DASSL_DG.top}/{domain}/{split}/class_{label:02d}"
                    for index in range(per_split[split]):
                        info = zipfile.ZipInfo(f"{folder}/{index + 1:05d}.jpg", date_time=(2019, 1, 1, 0, 0, 0))
                        zf.writestr(info, _jpeg(rng, label, domain_index))
    tmp.replace(path)


# --- the harness's split, shared by the 65-class task and its twin on Dassl's layout ------------------------

# the files torch.hub's cache holds for torchvision's resnet50(pretrained=True) and timm's resnet50.ram_in1k
WEIGHTS = (("resnet50-torchvision", "resnet50-0676ba61.pth"), ("resnet50-ram-timm", "resnet50_ram-a26f946b.pth"))
TEST_ENV = 0


def numbered(zf: zipfile.ZipFile, members: list[str], folder: Path) -> None:
    """The members' bytes as folder/00000.<ext>, ... in the given order: no class name, no original file name."""
    folder.mkdir(parents=True, exist_ok=True)
    for position, member in enumerate(members):
        (folder / f"{position:05d}{posixpath.splitext(member)[1]}").write_bytes(zf.read(member))


def prepare(args, archive_in_cache: tuple[str, str], layout: Layout) -> None:
    """One split as DomainBed's train.py cuts it (seed 0, test environment 0, holdout fraction 0.3), from the
    archive in the data cache; ``args`` are the harness's (evalkit.harness_args)."""
    if args.private is None or args.data is None:
        sys.exit("prepare.py: --private and --data are required")
    archive = args.data.joinpath(*archive_in_cache)
    envs = environments(archive, layout)
    splits = [domainbed.holdout_split(len(env.members), index) for index, env in enumerate(envs)]
    held_out, held_in = splits[TEST_ENV]
    test_env = envs[TEST_ENV]
    labels = np.asarray(test_env.labels, dtype=np.int64)
    args.private.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(archive) as zf:
        if args.split == "val":
            if args.workspace is None:
                sys.exit("prepare.py: --workspace is required for --split val")
            data = args.workspace / "data"
            record = {"classes": list(test_env.classes), "train_envs": [],
                      "heldout": {"env": TEST_ENV, "name": test_env.name, "folder": "heldout"}}
            for index, env in enumerate(envs):
                if index == TEST_ENV:
                    continue
                if env.classes != test_env.classes:
                    sys.exit(f"prepare.py: {env.name}'s classes differ from {test_env.name}'s")
                paths = []
                for member in env.members:
                    rel = "office_home/" + member.split("/", 1)[1]  # DomainBed renames the top folder
                    target = data / rel
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(zf.read(member))
                    paths.append(rel)
                record["train_envs"].append({
                    "env": index, "name": env.name,
                    **{part: [[paths[i], env.labels[i]] for i in positions.tolist()]
                       for part, positions in zip(("out", "in"), splits[index])}})
            numbered(zf, [test_env.members[i] for i in held_out], data / "heldout")
            (data / "splits.json").write_text(json.dumps(record, indent=1))
            checkpoints = data / "torch_home" / "hub" / "checkpoints"
            checkpoints.mkdir(parents=True, exist_ok=True)
            for artifact, name in WEIGHTS:
                shutil.copyfile(args.data / artifact / name, checkpoints / name)
            np.save(args.private / "val_labels.npy", labels[held_out])
        else:
            if args.out is None:
                sys.exit("prepare.py: --out is required for --split test")
            numbered(zf, [test_env.members[i] for i in held_in], args.out / "test_images")
            np.save(args.private / "test_labels.npy", labels[held_in])
