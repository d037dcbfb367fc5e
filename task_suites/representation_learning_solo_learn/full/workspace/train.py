"""Experiment driver (protected): self-supervised pre-training and a linear probe on CIFAR-100, FML-bench's
Representation_Learning_solo_learn protocol.

    python train.py --split val  --out OUT   pre-train get_model() on the train part of data/visible_*.npy
                                             (split_config.json) through two get_augmentation() views of each
                                             image, save model_checkpoint/backbone.pt, fit the linear probe on
                                             the train part's frozen features, predict the val part
    python train.py --split test --out OUT   load model_checkpoint/ (no pre-training), fit the linear probe on
                                             the whole visible pool's features, predict OUT/test_images.npy

Writes OUT/predictions.npy (int64 labels); the evaluator scores them with labels it keeps to itself. The loops
are the original's: pre-training minimises BarlowTwinsLoss(lambda_param, embedding_dim=2048) between the two
views' projections with SGD (momentum 0.9) and a per-epoch cosine schedule; the probe is a linear layer on
the backbone's features of un-augmented images (model in eval mode), SGD (momentum 0.9) with a cosine
schedule, seeded 100 for val and 200 for test. algorithm.py supplies the model, the hyper-parameters, the
augmentation and the loss. --scale smoke pre-trains on two batches of 8 and probes on 16 images.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision.transforms as T
from PIL import Image
from torch.utils.data import DataLoader, Dataset, TensorDataset

from pytest_fmlbench.evalkit import (
    OriginalSplitConfig,
    harness_args,
    load_split_config,
    original_split_indices,
    write_json,
)

import algorithm  # the editable method, next to this file

NUM_CLASSES = 100
SEED = 42
PROBE_SEED = {"val": 100, "test": 200}
EMBEDDING_DIM = 2048
CHECKPOINT = Path("model_checkpoint")
MEAN, STD = (0.5071, 0.4867, 0.4408), (0.2675, 0.2565, 0.2761)
REQUIRED = ("pretrain_epochs", "batch_size", "lr", "weight_decay", "lambda_param", "linear_eval_epochs",
            "linear_lr", "linear_batch_size")
FEATURE_BATCH, PRETRAIN_WORKERS, FEATURE_WORKERS = 256, 8, 4
SMOKE_BATCH, SMOKE_BATCHES, SMOKE_PROBE_IMAGES = 8, 2, 16

warnings.filterwarnings("ignore")


class Images(Dataset):
    """uint8 HWC images as PIL images (as torchvision's CIFAR100 yields them) through a transform."""

    def __init__(self, images: np.ndarray, transform):
        self.images, self.transform = images, transform

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, i):
        return self.transform(Image.fromarray(self.images[i]))


class TwoViews(Images):
    def __getitem__(self, i):
        image = Image.fromarray(self.images[i])
        return self.transform(image), self.transform(image)


def config_for(smoke: bool) -> dict:
    config = dict(algorithm.get_training_config())
    missing = [key for key in REQUIRED if key not in config]
    if missing:
        sys.exit(f"train.py: get_training_config() has no {', '.join(map(repr, missing))}")
    if smoke:
        config.update(pretrain_epochs=1, linear_eval_epochs=1, batch_size=min(int(config["batch_size"]), SMOKE_BATCH),
                      linear_batch_size=min(int(config["linear_batch_size"]), SMOKE_BATCH))
    return config


def build_model(device: torch.device) -> nn.Module:
    model = algorithm.get_model()
    if not isinstance(getattr(model, "backbone_dim", None), int):
        sys.exit("train.py: get_model() must return a model with an int backbone_dim (the probe's input width)")
    return model.to(device)


def pretrain(model: nn.Module, images: np.ndarray, config: dict, device: torch.device, workers: int,
             max_batches: int | None) -> None:
    loader = DataLoader(TwoViews(images, algorithm.get_augmentation()), batch_size=int(config["batch_size"]),
                        shuffle=True, num_workers=workers, drop_last=True, pin_memory=device.type == "cuda")
    criterion = algorithm.BarlowTwinsLoss(lambda_param=config["lambda_param"], embedding_dim=EMBEDDING_DIM).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=config["lr"], momentum=0.9, weight_decay=config["weight_decay"])
    epochs = int(config["pretrain_epochs"])
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=epochs)
    print(f"pre-training for {epochs} epochs on {len(images)} images", flush=True)
    model.train()
    for epoch in range(1, epochs + 1):
        total, batches = 0.0, 0
        for x1, x2 in loader:
            _, z1 = model(x1.to(device))
            _, z2 = model(x2.to(device))
            loss = criterion(z1, z2)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total, batches = total + loss.item(), batches + 1
            if max_batches is not None and batches == max_batches:
                break
        scheduler.step()
        if epoch % 20 == 0 or epoch in (1, epochs):
            print(f"pre-training epoch {epoch}/{epochs}: loss {total / max(batches, 1):.4f}", flush=True)


def features(model: nn.Module, images: np.ndarray, device: torch.device, workers: int) -> torch.Tensor:
    evaluate = T.Compose([T.ToTensor(), T.Normalize(MEAN, STD)])
    model.eval()
    with torch.no_grad():
        return torch.cat([model(x.to(device))[0].cpu()
                          for x in DataLoader(Images(images, evaluate), batch_size=FEATURE_BATCH, shuffle=False,
                                              num_workers=workers)])


def linear_probe(model: nn.Module, train_images: np.ndarray, train_labels: np.ndarray, eval_images: np.ndarray,
                 config: dict, device: torch.device, workers: int, seed: int) -> np.ndarray:
    """The probe fitted on the train images' frozen features; its labels for the eval images."""
    torch.manual_seed(seed)
    train_features = features(model, train_images, device, workers)
    eval_features = features(model, eval_images, device, workers)
    classifier = nn.Linear(model.backbone_dim, NUM_CLASSES).to(device)
    optimizer = torch.optim.SGD(classifier.parameters(), lr=config["linear_lr"], momentum=0.9, weight_decay=0)
    epochs = int(config["linear_eval_epochs"])
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=epochs)
    loader = DataLoader(TensorDataset(train_features, torch.from_numpy(train_labels)),
                        batch_size=int(config["linear_batch_size"]), shuffle=True)
    print(f"linear probe for {epochs} epochs on {len(train_images)} images (seed {seed})", flush=True)
    for _ in range(epochs):
        classifier.train()
        for x, y in loader:
            loss = F.cross_entropy(classifier(x.to(device)), y.to(device))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        scheduler.step()
    classifier.eval()
    with torch.no_grad():
        return classifier(eval_features.to(device)).argmax(dim=1).cpu().numpy().astype(np.int64)


def main() -> None:
    args = harness_args()
    if args.out is None:
        sys.exit("train.py: --out is required")
    smoke = args.scale == "smoke"
    torch.manual_seed(SEED)
    torch.cuda.manual_seed_all(SEED)
    np.random.seed(SEED)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    pretrain_workers, feature_workers = (0, 0) if smoke else (PRETRAIN_WORKERS, FEATURE_WORKERS)
    config = config_for(smoke)
    args.out.mkdir(parents=True, exist_ok=True)
    images, labels = np.load("data/visible_images.npy"), np.load("data/visible_labels.npy").astype(np.int64)
    model = build_model(device)
    if args.split == "val":
        train_pos, val_pos = original_split_indices(len(images), load_split_config(Path.cwd(), OriginalSplitConfig))
        if len(val_pos) == 0:
            sys.exit(f"train.py: split_config.json leaves no val image of {len(images)}")
        print(f"agent train: {len(train_pos)}, agent val: {len(val_pos)}", flush=True)
        pretrain(model, images[train_pos], config, device, pretrain_workers, SMOKE_BATCHES if smoke else None)
        CHECKPOINT.mkdir(exist_ok=True)
        torch.save(model.state_dict(), CHECKPOINT / "backbone.pt")
        probe_pos, predicted = train_pos, images[val_pos]
    else:
        if not (CHECKPOINT / "backbone.pt").is_file():
            sys.exit("train.py: no model_checkpoint/backbone.pt: the test run needs the val run's checkpoint")
        model.load_state_dict(torch.load(CHECKPOINT / "backbone.pt", map_location=device))
        probe_pos, predicted = np.arange(len(images)), np.load(args.out / "test_images.npy")
    if smoke:
        probe_pos = probe_pos[:SMOKE_PROBE_IMAGES]
    predictions = linear_probe(model, images[probe_pos], labels[probe_pos], predicted, config, device,
                               feature_workers, PROBE_SEED[args.split])
    np.save(args.out / "predictions.npy", predictions)
    write_json(args.out / "run_info.json", {"split": args.split, "scale": args.scale, "n_predicted": len(predictions)})
    print(f"[{args.split}] predicted {len(predictions)} images", flush=True)


if __name__ == "__main__":
    main()
