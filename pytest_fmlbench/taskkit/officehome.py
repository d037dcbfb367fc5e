"""OfficeHome as DomainBed reads it, straight from the archive DomainBed downloads, and that archive's fixture.

DomainBed unpacks ``OfficeHomeDataset_10072016.zip`` and renames its top folder to ``office_home``; its
``MultipleEnvironmentImageFolder`` takes every folder there as an environment, in sorted order (Art,
Clipart, Product, Real World: test environment 0 is Art), and reads each with torchvision's
``ImageFolder``: classes are the sorted sub-folder names, images are walked in sorted order and kept
when their extension is an image's. :func:`environments` lists the archive's members in exactly that
order, so that indices, and DomainBed's seeded holdout split over them, match the original's.
"""

from __future__ import annotations

import io
import posixpath
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

TOP = "OfficeHomeDataset_10072016"
DOMAINS = ("Art", "Clipart", "Product", "Real World")
# torchvision.datasets.folder.IMG_EXTENSIONS, compared lower-cased as ImageFolder does
IMG_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")


@dataclass(frozen=True)
class Environment:
    name: str
    classes: tuple[str, ...]
    members: tuple[str, ...]  # archive member names, in ImageFolder's order
    labels: tuple[int, ...]


def environments(archive: Path) -> list[Environment]:
    """The archive's domains in DomainBed's order, each with its images in ImageFolder's order."""
    with zipfile.ZipFile(archive) as zf:
        names = zf.namelist()
    folders: dict[str, set[str]] = {}
    files: dict[tuple[str, str], list[tuple[str, str, str]]] = {}
    for name in names:
        parts = name.split("/")
        if parts[0] != TOP or len(parts) < 3:
            continue
        domain = parts[1]
        folders.setdefault(domain, set())
        if len(parts) == 3:
            continue  # a file (or the folder entry itself) directly in the domain folder: not a class
        folders[domain].add(parts[2])
        if not name.endswith("/") and name.lower().endswith(IMG_EXTENSIONS):
            files.setdefault((domain, parts[2]), []).append((posixpath.dirname(name), parts[-1], name))
    if tuple(sorted(folders)) != DOMAINS:
        raise ValueError(f"{archive}: expected the domain folders {', '.join(DOMAINS)} under {TOP}/, "
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

# few images: DomainBed's augmentation (colour jitter at 224 x 224) costs tens of milliseconds an image on a CPU,
# and its loop evaluates every training split at the first and the last step
FIXTURE_CLASSES = 7
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
