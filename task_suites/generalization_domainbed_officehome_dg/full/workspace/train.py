"""Experiment driver (protected): DomainBed's ERM training loop on OfficeHome, test environment 0 (Art), as
FML-bench's Generalization_domainbed_officehome runs `domainbed.scripts.train` (seed 0, DomainBed's default
hyper-parameters for ERM on OfficeHome, 5,001 steps, one minibatch per training domain per step).

    python train.py --split val  --out OUT   train on Clipart, Product and Real World (their in-splits), save
                                             model_checkpoint/model.pkl, predict Art's out-split (data/heldout/)
    python train.py --split test --out OUT   load model_checkpoint/model.pkl (no training), predict
                                             OUT/test_images/ (Art's in-split)

The algorithm is always `algorithms.get_algorithm_class("ERM")`, built with (input_shape, num_classes,
num_domains, hparams); change the ERM class (domainbed/algorithms.py) and the networks
(domainbed/networks.py). Writes OUT/predictions.npy (int64 labels, images in file-name order). --scale
smoke runs a few steps of small batches, for checking the code path on fixture data.
"""

from __future__ import annotations

import collections
import json
import os
import random
import sys
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from torchvision import transforms

from pytest_fmlbench.evalkit import harness_args

DATA, CHECKPOINT = Path("data"), Path("model_checkpoint")
# DomainBed's networks.py loads ImageNet weights twice over: torchvision's resnet50(pretrained=True), then
# timm's resnet50.ram_in1k. Both come from the verified copies in data/torch_home (torch.hub's cache layout;
# timm takes its cached file there when TIMM_USE_OLD_CACHE is set before timm is imported). The sandbox has
# no network, and nothing should try it.
os.environ["TORCH_HOME"] = str((DATA / "torch_home").resolve())
os.environ["TIMM_USE_OLD_CACHE"] = "1"
os.environ["HF_HUB_OFFLINE"] = "1"

# DomainBed at the pinned commit, next to this file (its networks.py imports timm, hence after the settings)
from domainbed import algorithms, hparams_registry  # noqa: E402
from domainbed.lib.fast_data_loader import InfiniteDataLoader  # noqa: E402

ALGORITHM, DATASET = "ERM", "OfficeHome"
INPUT_SHAPE = (3, 224, 224)
# datasets.OfficeHome's class attributes; FML-bench passes --steps 5001
N_STEPS, CHECKPOINT_FREQ, N_WORKERS = 5001, 300, 8
SMOKE_STEPS, SMOKE_BATCH = 3, 2
SEED = 0
EVAL_BATCH = 64  # DomainBed's FastDataLoader for evaluation
IMAGENET_MEAN, IMAGENET_STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]

# datasets.MultipleEnvironmentImageFolder's two transforms: the plain one for the test domain, the augmented
# one for the training domains when hparams["data_augmentation"] (in- and out-splits alike)
PLAIN = transforms.Compose([transforms.Resize((224, 224)), transforms.ToTensor(),
                            transforms.Normalize(mean=IMAGENET_MEAN, std=IMAGENET_STD)])
AUGMENTED = transforms.Compose([transforms.RandomResizedCrop(224, scale=(0.7, 1.0)), transforms.RandomHorizontalFlip(),
                                transforms.ColorJitter(0.3, 0.3, 0.3, 0.3), transforms.RandomGrayscale(),
                                transforms.ToTensor(), transforms.Normalize(mean=IMAGENET_MEAN, std=IMAGENET_STD)])


class Images(torch.utils.data.Dataset):
    """Image files (read as ImageFolder's default loader reads them: PIL, RGB) with their labels."""

    def __init__(self, paths: list[Path], labels: list[int], transform):
        self.paths, self.labels, self.transform = paths, labels, transform

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int):
        with open(self.paths[index], "rb") as fh:
            image = Image.open(fh).convert("RGB")
        return self.transform(image), self.labels[index]


def split(pairs: list, transform) -> Images:
    return Images([DATA / path for path, _ in pairs], [label for _, label in pairs], transform)


def numbered_images(folder: Path) -> Images:
    files = sorted(p for p in folder.iterdir() if p.is_file())
    return Images(files, [-1] * len(files), PLAIN)


def predict(algorithm, dataset: Images, device: str, workers: int) -> np.ndarray:
    """Class labels as misc.accuracy reads them: argmax of the logits, or logit > 0 for a single one."""
    algorithm.eval()
    out = []
    loader = torch.utils.data.DataLoader(dataset, batch_size=EVAL_BATCH, shuffle=False, num_workers=workers)
    with torch.no_grad():
        for x, _ in loader:
            logits = algorithm.predict(x.to(device))
            out.append((logits[:, 0] > 0).long() if logits.size(1) == 1 else logits.argmax(1))
    algorithm.train()
    return torch.cat(out).cpu().numpy().astype(np.int64)


def build(hparams: dict, num_classes: int, num_domains: int, device: str):
    algorithm = algorithms.get_algorithm_class(ALGORITHM)(INPUT_SHAPE, num_classes, num_domains, hparams)
    return algorithm.to(device)


def train(layout: dict, hparams: dict, steps: int, workers: int, device: str):
    transform = AUGMENTED if hparams["data_augmentation"] else PLAIN
    envs = layout["train_envs"]
    train_sets = [split(env["in"], transform) for env in envs]
    monitor = {f"env{env['env']}_{part}": split(env[part], transform) for env in envs for part in ("in", "out")}
    loaders = [InfiniteDataLoader(dataset=env, weights=None, batch_size=hparams["batch_size"], num_workers=workers)
               for env in train_sets]
    algorithm = build(hparams, len(layout["classes"]), len(envs), device)
    minibatches = zip(*loaders)
    steps_per_epoch = min(len(env) / hparams["batch_size"] for env in train_sets)
    logged = collections.defaultdict(list)
    for step in range(steps):
        batch = [(x.to(device), y.to(device)) for x, y in next(minibatches)]
        for key, value in algorithm.update(batch, None).items():
            logged[key].append(value)
        if step % CHECKPOINT_FREQ == 0 or step == steps - 1:
            row = {"step": step, "epoch": round(step / steps_per_epoch, 3)}
            row.update({key: round(float(np.mean(values)), 6) for key, values in logged.items()})
            for name, dataset in monitor.items():
                row[f"{name}_acc"] = round(float(np.mean(predict(algorithm, dataset, device, workers)
                                                         == np.asarray(dataset.labels))), 6)
            print(" ".join(f"{key}={value}" for key, value in row.items()), flush=True)
            logged.clear()
    return algorithm


def main() -> None:
    args = harness_args()
    if args.out is None:
        sys.exit("train.py: --out is required")
    random.seed(SEED)
    np.random.seed(SEED)
    torch.manual_seed(SEED)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    device = "cuda" if torch.cuda.is_available() else "cpu"
    smoke = args.scale == "smoke"
    workers = 0 if smoke else N_WORKERS
    args.out.mkdir(parents=True, exist_ok=True)
    layout = json.loads((DATA / "splits.json").read_text())

    if args.split == "val":
        hparams = hparams_registry.default_hparams(ALGORITHM, DATASET)
        if smoke:
            hparams["batch_size"] = min(hparams["batch_size"], SMOKE_BATCH)
        print("hparams: " + ", ".join(f"{key}={value}" for key, value in sorted(hparams.items())), flush=True)
        algorithm = train(layout, hparams, SMOKE_STEPS if smoke else N_STEPS, workers, device)
        CHECKPOINT.mkdir(exist_ok=True)
        # DomainBed's save_checkpoint layout
        torch.save({"model_input_shape": INPUT_SHAPE, "model_num_classes": len(layout["classes"]),
                    "model_num_domains": len(layout["train_envs"]), "model_hparams": hparams,
                    "model_dict": algorithm.state_dict()}, CHECKPOINT / "model.pkl")
        images = numbered_images(DATA / layout["heldout"]["folder"])
    else:
        if not (CHECKPOINT / "model.pkl").is_file():
            sys.exit("train.py: no model_checkpoint/model.pkl: the test run needs the val run's checkpoint")
        saved = torch.load(CHECKPOINT / "model.pkl", map_location=device, weights_only=False)
        algorithm = build(saved["model_hparams"], saved["model_num_classes"], saved["model_num_domains"], device)
        algorithm.load_state_dict(saved["model_dict"])
        images = numbered_images(args.out / "test_images")
    np.save(args.out / "predictions.npy", predict(algorithm, images, device, workers))


if __name__ == "__main__":
    main()
