"""Experiment driver (protected): train the classifier on CIFAR-10, score inputs for OOD detection, as FML-bench's
Robustness_openood does.

    python train.py --split val  --out OUT   train on the train part of data/visible_*.npy (split_config.json),
                                             save model_checkpoint/model.pt, score the val part of the pool
                                             followed by data/val_ood_images.npy (CIFAR-100)
    python train.py --split test --out OUT   load model_checkpoint/ (no training), score OUT/test_images.npy
                                             (hidden CIFAR-10 test images and SVHN images, mixed, unmarked)

Writes OUT/scores.npy (float64, one per scored input, in order; higher = more in-distribution); the evaluator
computes AUROC from them with marks it keeps to itself. The training loop is the original's: random crop
(padding 4) and horizontal flip, normalisation with CIFAR-10's statistics, cross-entropy, SGD with momentum and
weight decay, the learning rate multiplied by lr_gamma at each of lr_milestones (epochs). algorithm.py supplies
the network, the hyper-parameters and the score. --scale smoke trains on two small batches.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
import torchvision.transforms as T
from PIL import Image
from torch.utils.data import DataLoader, Dataset

from pytest_fmlbench.evalkit import (
    OriginalSplitConfig,
    harness_args,
    load_split_config,
    original_split_indices,
    write_json,
)

import algorithm  # the editable method, next to this file

NUM_CLASSES = 10
SEED = 42
CHECKPOINT = Path("model_checkpoint")
MEAN, STD = (0.4914, 0.4822, 0.4465), (0.2023, 0.1994, 0.2010)
REQUIRED = ("epochs", "batch_size", "lr", "momentum", "weight_decay", "lr_milestones", "lr_gamma")
SCORE_BATCH = 256
SMOKE_BATCHES, SMOKE_BATCH = 2, 8

warnings.filterwarnings("ignore", category=UserWarning)


class Images(Dataset):
    """uint8 HWC images as PIL images (as torchvision's CIFAR datasets yield them) through a transform."""

    def __init__(self, images: np.ndarray, labels: np.ndarray | None, transform):
        self.images, self.labels, self.transform = images, labels, transform

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, i):
        image = self.transform(Image.fromarray(self.images[i]))
        return image if self.labels is None else (image, int(self.labels[i]))


def config_for(scale: str) -> dict:
    config = dict(algorithm.get_training_config())
    missing = [key for key in REQUIRED if key not in config]
    if missing:
        sys.exit(f"train.py: get_training_config() has no {', '.join(map(repr, missing))}")
    if scale == "smoke":
        config["epochs"] = 1
        config["batch_size"] = min(int(config["batch_size"]), SMOKE_BATCH)
    return config


def train(model: torch.nn.Module, dataset: Dataset, config: dict, device: torch.device, workers: int,
          max_batches: int | None) -> None:
    loader = DataLoader(dataset, batch_size=int(config["batch_size"]), shuffle=True, num_workers=workers,
                        pin_memory=device.type == "cuda")
    optimizer = torch.optim.SGD(model.parameters(), lr=config["lr"], momentum=config["momentum"],
                                weight_decay=config["weight_decay"])
    scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=list(config["lr_milestones"]),
                                                     gamma=config["lr_gamma"])
    epochs = int(config["epochs"])
    print(f"training for {epochs} epochs on {len(dataset)} images", flush=True)
    for epoch in range(1, epochs + 1):
        model.train()
        correct = seen = 0
        for batch, (inputs, targets) in enumerate(loader, start=1):
            inputs, targets = inputs.to(device), targets.to(device)
            outputs = model(inputs)
            loss = F.cross_entropy(outputs, targets)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            correct += outputs.argmax(dim=1).eq(targets).sum().item()
            seen += len(targets)
            if max_batches is not None and batch == max_batches:
                break
        scheduler.step()
        if epoch % 20 == 0 or epoch == epochs:
            print(f"epoch {epoch}/{epochs}: train accuracy {correct / max(seen, 1):.4f}", flush=True)


def score(model: torch.nn.Module, images: np.ndarray, transform, device: torch.device, workers: int) -> np.ndarray:
    model.eval()
    scores = []
    for inputs in DataLoader(Images(images, None, transform), batch_size=SCORE_BATCH, shuffle=False,
                             num_workers=workers):
        batch = algorithm.compute_ood_score(model, inputs.to(device))
        if not isinstance(batch, torch.Tensor) or tuple(batch.shape) != (len(inputs),):
            sys.exit(f"train.py: compute_ood_score must return a tensor of shape ({len(inputs)},), "
                     f"got {getattr(batch, 'shape', type(batch).__name__)}")
        scores.append(batch.detach().double().cpu())
    out = torch.cat(scores).numpy()
    if not np.all(np.isfinite(out)):
        sys.exit("train.py: compute_ood_score returned NaN or infinite scores")
    return out


def main() -> None:
    args = harness_args()
    if args.out is None:
        sys.exit("train.py: --out is required")
    torch.manual_seed(SEED)
    torch.cuda.manual_seed_all(SEED)
    np.random.seed(SEED)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    workers = 0 if args.scale == "smoke" else 4
    augment = T.Compose([T.RandomCrop(32, padding=4), T.RandomHorizontalFlip(), T.ToTensor(), T.Normalize(MEAN, STD)])
    plain = T.Compose([T.ToTensor(), T.Normalize(MEAN, STD)])
    args.out.mkdir(parents=True, exist_ok=True)
    model = algorithm.get_model(num_classes=NUM_CLASSES).to(device)
    if args.split == "val":
        config = config_for(args.scale)
        images, labels = np.load("data/visible_images.npy"), np.load("data/visible_labels.npy")
        train_pos, val_pos = original_split_indices(len(images), load_split_config(Path.cwd(), OriginalSplitConfig))
        if len(val_pos) == 0:
            sys.exit(f"train.py: split_config.json leaves no val image of {len(images)}")
        print(f"agent train: {len(train_pos)}, agent val: {len(val_pos)}", flush=True)
        train(model, Images(images[train_pos], labels[train_pos], augment), config, device, workers,
              SMOKE_BATCHES if args.scale == "smoke" else None)
        CHECKPOINT.mkdir(exist_ok=True)
        torch.save(model.state_dict(), CHECKPOINT / "model.pt")
        scored = np.concatenate([images[val_pos], np.load("data/val_ood_images.npy")])
    else:
        if not (CHECKPOINT / "model.pt").is_file():
            sys.exit("train.py: no model_checkpoint/model.pt: the test run needs the val run's checkpoint")
        model.load_state_dict(torch.load(CHECKPOINT / "model.pt", map_location=device))
        scored = np.load(args.out / "test_images.npy")
    scores = score(model, scored, plain, device, workers)
    np.save(args.out / "scores.npy", scores)
    write_json(args.out / "run_info.json", {"split": args.split, "scale": args.scale, "n_scored": len(scores)})
    print(f"[{args.split}] scored {len(scores)} inputs", flush=True)


if __name__ == "__main__":
    main()
