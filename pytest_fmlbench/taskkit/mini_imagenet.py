"""mini-ImageNet's test classes as FML-bench's Data_Efficiency_easyfsl reads them, through easyfsl's own code.

The original unzips Kaggle's ``arjunashok33/miniimagenet`` into ``data/mini_imagenet/images`` (one folder per
class, ``<wnid>/<image>.JPEG``), embeds the 12,000 images that easyfsl's ``data/mini_imagenet/test.csv`` lists
(20 classes x 600) with FEAT's ResNet-12 (easyfsl's ``scripts.predict_embeddings``), and draws 5-way 1-shot
episodes from those features with easyfsl's ``TaskSampler`` (``scripts.benchmark_methods``). Here every step
runs the code of the verified easyfsl checkout at the original's commit: the split CSV, the backbone, its
checkpoint loader, the sampler and its collate function. The images are read from the archive itself (nothing
unpacked), and the features are computed once per cache (on a GPU where one is visible) and kept beside the
artefacts, out of every sandbox's view.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import random
import sys
import zipfile
from pathlib import Path

import numpy as np

ARCHIVE = ("mini-imagenet", "miniimagenet.zip")
WEIGHTS = ("feat-resnet12-mini-imagenet", "feat_resnet12_mini_imagenet.pth")
CHECKOUT = ("easy-few-shot-learning", "src")
SPLIT_CSV = "data/mini_imagenet/test.csv"
BACKBONE_CONFIGS = "scripts/backbones_configs.json"
BACKBONE = "feat_resnet12"
# bump when the extraction below changes what it computes: cached features of an older version are not reused
FEATURES_VERSION = 1


class DataProblem(RuntimeError):
    """The data is not what the original reads; one line."""


def use_checkout(checkout: Path) -> None:
    """Make ``import easyfsl`` load the verified checkout's package, not any other copy."""
    for name in [name for name in sys.modules if name == "easyfsl" or name.startswith("easyfsl.")]:
        del sys.modules[name]
    sys.path.insert(0, str(checkout))
    import easyfsl

    if Path(easyfsl.__file__).resolve().parent != (checkout / "easyfsl").resolve():
        raise DataProblem(f"easyfsl was imported from {easyfsl.__file__}, not from the checkout {checkout}")


def test_split(checkout: Path) -> list[tuple[str, str]]:
    """(class name, image name) of every row of easyfsl's test split CSV, in its order."""
    with open(checkout / SPLIT_CSV, newline="") as fh:
        return [(row["class_name"], row["image_name"]) for row in csv.DictReader(fh)]


def check_images(archive: Path, rows: list[tuple[str, str]]) -> None:
    """Every image of the test split is in the archive where the original's unzip puts it (``class/image``);
    raises DataProblem in one line otherwise."""
    try:
        with zipfile.ZipFile(archive) as zf:
            names = set(zf.namelist())
    except (OSError, zipfile.BadZipFile) as exc:
        raise DataProblem(f"{archive.name} is not a readable zip archive ({exc})") from None
    missing = [f"{c}/{i}" for c, i in rows if f"{c}/{i}" not in names]
    if missing:
        classes = len({c for c, _ in rows})
        raise DataProblem(f"{archive.name} lacks {len(missing)} of the {len(rows)} images ({classes} classes) that "
                          f"easyfsl's {SPLIT_CSV} lists (first: {missing[0]}): it is not the archive the original "
                          "unzips into data/mini_imagenet/images")


class _ArchiveImages:
    """The test split's images read from the zip, transformed, with MiniImageNet's labels (class index in order
    of first appearance in the CSV). Each DataLoader worker opens its own handle."""

    def __init__(self, archive: Path, rows: list[tuple[str, str]], transform):
        self.archive, self.rows, self.transform = archive, rows, transform
        classes = list(dict.fromkeys(c for c, _ in rows))
        self.labels = [classes.index(c) for c, _ in rows]
        self._zip: zipfile.ZipFile | None = None
        self._pid: int | None = None

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index: int):
        from PIL import Image

        if self._zip is None or self._pid != os.getpid():
            self._zip, self._pid = zipfile.ZipFile(self.archive), os.getpid()
        class_name, image_name = self.rows[index]
        with Image.open(io.BytesIO(self._zip.read(f"{class_name}/{image_name}"))) as image:
            return self.transform(image.convert("RGB")), self.labels[index]


def _transform(checkout: Path):
    """The backbone's evaluation transform as predict_embeddings builds it from the checkout's configuration."""
    from torchvision import transforms
    from torchvision.transforms import InterpolationMode

    config = json.loads((checkout / BACKBONE_CONFIGS).read_text())[BACKBONE]["transform"]
    interpolation = {"bilinear": InterpolationMode.BILINEAR, "bicubic": InterpolationMode.BICUBIC}[config["interpolation"]]
    return transforms.Compose([
        transforms.Resize(int(config["image_size"] * config["crop_ratio"]), interpolation=interpolation),
        transforms.CenterCrop(config["image_size"]),
        transforms.ToTensor(),
        transforms.Normalize(config["mean"], config["std"]),
    ])


def extract_features(archive: Path, weights: Path, checkout: Path, device: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """FEAT's ResNet-12 embeddings of the test split (float32 (n, 640)) and their labels (int64, in CSV order),
    computed by the checkout's ``feat_resnet12_from_checkpoint`` and ``predict_embeddings``."""
    import torch
    from torch.utils.data import DataLoader

    use_checkout(checkout)
    from easyfsl.modules.build_from_checkpoint import feat_resnet12_from_checkpoint
    from easyfsl.utils import predict_embeddings

    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    rows = test_split(checkout)
    dataset = _ArchiveImages(archive, rows, _transform(checkout))
    workers = min(12, os.cpu_count() or 1) if len(rows) > 1000 else 0
    loader = DataLoader(dataset, batch_size=1024 if device == "cuda" else 64, num_workers=workers, shuffle=False)
    model = feat_resnet12_from_checkpoint(weights, device)
    model.eval()
    frame = predict_embeddings(loader, model, device=device)
    embeddings = torch.stack(list(frame["embedding"])).numpy().astype(np.float32)
    return embeddings, np.asarray(frame["class_name"], dtype=np.int64)


def cached_features(data: Path) -> tuple[np.ndarray, np.ndarray]:
    """The test split's features, extracted once per cache from the verified artefacts under ``data`` (the
    harness's ``{data}``) and kept in its ``derived/`` folder, named after what they were computed from."""
    from filelock import FileLock

    archive, weights, checkout = data.joinpath(*ARCHIVE), data.joinpath(*WEIGHTS), data.joinpath(*CHECKOUT)
    check_images(archive, test_split(checkout))
    sources = [json.loads((data / name / "stamp.json").read_text()) for name in (ARCHIVE[0], WEIGHTS[0], CHECKOUT[0])]
    key = hashlib.sha256(json.dumps([FEATURES_VERSION, sources[0]["sha256"], sources[1]["sha256"],
                                     sources[2]["commit"]]).encode()).hexdigest()[:16]
    folder = data / "derived"
    folder.mkdir(exist_ok=True)
    path = folder / f"{BACKBONE}_mini_imagenet_test-{key}.npz"
    with FileLock(str(path) + ".lock"):
        if not path.exists():
            embeddings, labels = extract_features(archive, weights, checkout)
            tmp = path.with_name(path.name + ".tmp.npz")
            np.savez(tmp, embeddings=embeddings, labels=labels)
            tmp.replace(path)
    with np.load(path, allow_pickle=False) as saved:
        return saved["embeddings"], saved["labels"]


def _constructible(task_sampler: type) -> type:
    """easyfsl's TaskSampler, unchanged, made constructible on this torch: it calls
    ``Sampler.__init__(data_source=None)``, which torch >= 2.2 rejects; a base placed after it in the MRO takes the
    argument and drops it."""
    from torch.utils.data import Sampler

    class TakesDataSource(Sampler):
        def __init__(self, data_source=None):
            super().__init__()

    return type("TaskSampler", (task_sampler, TakesDataSource), {})


def draw_episodes(embeddings: np.ndarray, labels: np.ndarray, checkout: Path, *, seed: int, n_way: int, n_shot: int,
                  n_query: int, n_tasks: int) -> dict[str, np.ndarray]:
    """The episodes benchmark_methods evaluates on with ``--random-seed=seed``: its seeding, easyfsl's
    FeaturesDataset (from the features' frame) and TaskSampler, and the sampler's collate function for the
    episode labels. Returns pool indices and labels: ``support`` (n_tasks, n_way*n_shot), ``support_labels``,
    ``query`` (n_tasks, n_way*n_query) and ``query_labels``."""
    import pandas as pd
    import torch

    use_checkout(checkout)
    from easyfsl.datasets import FeaturesDataset
    from easyfsl.samplers import TaskSampler

    dataset = FeaturesDataset.from_dataframe(pd.DataFrame({"embedding": list(embeddings), "class_name": labels}))
    # scripts.utils.set_random_seed: the sampler draws from Python's random module
    np.random.seed(seed)
    torch.manual_seed(seed)
    random.seed(seed)
    sampler = _constructible(TaskSampler)(dataset, n_way=n_way, n_shot=n_shot, n_query=n_query, n_tasks=n_tasks)
    episodes: dict[str, list] = {"support": [], "support_labels": [], "query": [], "query_labels": []}
    for indices in sampler:
        _, support_labels, _, query_labels, _ = sampler.episodic_collate_fn([dataset[i] for i in indices])
        grid = np.asarray(indices, dtype=np.int64).reshape(n_way, n_shot + n_query)
        episodes["support"].append(grid[:, :n_shot].reshape(-1))
        episodes["query"].append(grid[:, n_shot:].reshape(-1))
        episodes["support_labels"].append(support_labels.numpy())
        episodes["query_labels"].append(query_labels.numpy())
    return {name: np.stack(rows).astype(np.int64) for name, rows in episodes.items()}


# --- smoke-scale stand-ins ---------------------------------------------------------------------------------------

# one more class than a 5-way episode takes (so the sampler still chooses among them), 5 images each (1 shot and
# the smoke's 3 queries drawn from more than they need): the smoke run embeds every image with the full ResNet-12
# on the CPU, which costs about as much as the rest of its run for every 30 images
FIXTURE_CLASSES = 6
FIXTURE_IMAGES_PER_CLASS = 5


def fixture_rows() -> list[tuple[str, str]]:
    """The stand-in's test split: a few classes in WordNet-id form, a few images each."""
    return [(f"n{90000000 + c:08d}", f"n{90000000 + c:08d}_{i:05d}.JPEG")
            for c in range(FIXTURE_CLASSES) for i in range(FIXTURE_IMAGES_PER_CLASS)]


def write_archive_fixture(path: Path) -> None:
    """A zip in the Kaggle archive's layout (``<wnid>/<image>.JPEG`` at its root) holding tiny tinted JPEGs of the
    stand-in's test classes, and one class of another split (which the check ignores)."""
    from PIL import Image

    rng = np.random.default_rng(84)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    extra = [(f"n{80000000:08d}", f"n{80000000:08d}_{i:05d}.JPEG") for i in range(2)]
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_STORED) as zf:
        for class_name, image_name in fixture_rows() + extra:
            # a faint class tint under heavy noise: episodes are told apart often, not always
            tint = (int(class_name[-2:]) * 3) % 64
            pixels = np.clip(rng.integers(0, 192, size=(12, 12, 3)) + np.array([tint, 64 - tint, 32]), 0, 255)
            buffer = io.BytesIO()
            Image.fromarray(pixels.astype(np.uint8)).save(buffer, format="JPEG", quality=90)
            info = zipfile.ZipInfo(f"{class_name}/{image_name}", date_time=(2000, 1, 1, 0, 0, 0))
            zf.writestr(info, buffer.getvalue())
    tmp.replace(path)


def write_weights_fixture(path: Path) -> None:
    """FEAT's checkpoint layout (``{"params": {"encoder.<key>": tensor}}``) for easyfsl's feat_resnet12, with
    seeded random weights: every key and shape the loader checks, none of the training."""
    import torch
    from easyfsl.modules import feat_resnet12

    torch.manual_seed(12)
    state = {f"encoder.{key}": value for key, value in feat_resnet12().state_dict().items()}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    torch.save({"params": state}, tmp)
    tmp.replace(path)


def write_repository_fixture(path: Path) -> None:
    """A repository in easy-few-shot-learning's layout: the installed easyfsl package (1.5.0, whose modules the
    task uses equal those of the pinned commit but for lint-only changes), the backbone's and the methods'
    configurations in ``scripts/`` with the values of the pinned commit, and the stand-in's test split CSV."""
    import importlib.util
    import shutil
    import tempfile

    from . import gitrepo

    spec = importlib.util.find_spec("easyfsl")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("easyfsl is not installed (pip install -e '.[tasks]')")
    with tempfile.TemporaryDirectory() as staging:
        tree = Path(staging)
        shutil.copytree(spec.submodule_search_locations[0], tree / "easyfsl",
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "tests"))
        (tree / "scripts").mkdir()
        (tree / "scripts" / "__init__.py").write_text("")
        (tree / BACKBONE_CONFIGS).write_text(json.dumps({BACKBONE: {"transform": {
            "image_size": 84, "crop_ratio": 1.15, "mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225],
            "interpolation": "bilinear"}}}, indent=2))
        (tree / "scripts" / "methods_configs.json").write_text(json.dumps(
            {"prototypical_networks": {"default": {"feature_normalization": 2}},
             "simple_shot": {"default": {"feature_normalization": 2}}}, indent=2))
        (tree / SPLIT_CSV).parent.mkdir(parents=True)
        with open(tree / SPLIT_CSV, "w", newline="") as fh:
            writer = csv.writer(fh, lineterminator="\n")
            writer.writerow(["class_name", "image_name"])
            writer.writerows(fixture_rows())
        gitrepo.write_repository(path, tree, "easy-few-shot-learning stand-in: the installed easyfsl package")
