"""Experiment driver (protected): MoCo pre-training and a linear probe on CIFAR-10, FML-bench's
Representation_Learning_lightly protocol.

    python train.py --split val  --out OUT   pre-train EvolvingModel on the train part of data/visible_*.npy
                                             (split_config.json) through EvolvingTransform's views, freeze its
                                             backbone, fit the linear probe on the same images with their labels,
                                             save model_checkpoint/{backbone,classifier}.pt, predict the val part
    python train.py --split test --out OUT   load model_checkpoint/ (no training), predict OUT/test_images.npy

Writes OUT/predictions.npy (int64 labels); the evaluator scores them with labels it keeps to itself. The
schedule is the original's and is not the method's to change: 100 epochs of pre-training at batch size 512
(lr 0.06 scaled by batch size / 512, a memory bank of 4,096), then 100 epochs of a linear classifier on the
frozen 512 backbone features (SGD at lr 30, cosine schedule, random crop and flip), both with Lightning on one
device. --scale smoke runs one epoch of two batches of 8 images of each stage.
"""

from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path

import numpy as np
import pytorch_lightning as pl
import torch
import torch.nn as nn
import torchvision.transforms as T
from lightly.models.utils import deactivate_requires_grad
from lightly.transforms.utils import IMAGENET_NORMALIZE
from PIL import Image
from pytorch_lightning.loggers import CSVLogger
from torch.utils.data import DataLoader, Dataset

from pytest_fmlbench.evalkit import (
    OriginalSplitConfig,
    harness_args,
    load_split_config,
    original_split_indices,
    write_json,
)

from model import EvolvingModel  # the editable method, next to this file
from transform import EvolvingTransform

NUM_CLASSES, FEATURES = 10, 512
SEED = 1
MAX_EPOCHS, BATCH_SIZE, MEMORY_BANK_SIZE = 100, 512, 4096
LR = 0.06 * BATCH_SIZE / 512
PROBE_LR = 30.0
WORKERS = 16
REPORT_EVERY = 10
SMOKE_BATCH, SMOKE_BATCHES = 8, 2  # 8: one image per batch-norm group of the backbone
CHECKPOINT = Path("model_checkpoint")
NORMALISE = T.Normalize(mean=IMAGENET_NORMALIZE["mean"], std=IMAGENET_NORMALIZE["std"])
PROBE_AUGMENT = T.Compose([T.RandomCrop(32, padding=4), T.RandomHorizontalFlip(), T.ToTensor(), NORMALISE])
EVALUATE = T.Compose([T.Resize((32, 32)), T.ToTensor(), NORMALISE])

warnings.filterwarnings("ignore", category=UserWarning)
warnings.filterwarnings("ignore", module="pytorch_lightning")


class Images(Dataset):
    """uint8 HWC images as PIL images (as torchvision's CIFAR10 yields them) through a transform, with their
    labels where there are any."""

    def __init__(self, images: np.ndarray, labels: np.ndarray | None, transform):
        self.images, self.labels, self.transform = images, labels, transform

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, i):
        image = self.transform(Image.fromarray(self.images[i]))
        return image if self.labels is None else (image, int(self.labels[i]))


class LinearProbe(pl.LightningModule):
    """A linear classifier on the frozen backbone's flattened features (the backbone's batch-norm statistics
    still follow the probe's training batches, as in the original)."""

    def __init__(self, backbone: nn.Module, epochs: int):
        super().__init__()
        self.backbone, self.epochs = backbone, epochs
        deactivate_requires_grad(backbone)
        self.fc = nn.Linear(FEATURES, NUM_CLASSES)
        self.criterion = nn.CrossEntropyLoss()

    def forward(self, x):
        return self.fc(self.backbone(x).flatten(start_dim=1))

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = self.criterion(self(x), y)
        self.log("train_loss_fc", loss, on_epoch=True, batch_size=len(y))
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val_acc", (self(x).argmax(dim=1) == y).float().mean(), on_epoch=True, batch_size=len(y))

    def configure_optimizers(self):
        optimizer = torch.optim.SGD(self.fc.parameters(), lr=PROBE_LR)
        return [optimizer], [torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, self.epochs)]


class EpochReport(pl.Callback):
    """Prints the logged epoch metrics every REPORT_EVERY epochs and after the last (no progress bars in logs)."""

    def on_train_epoch_end(self, trainer, module):
        epoch = trainer.current_epoch + 1
        if epoch % REPORT_EVERY and epoch != trainer.max_epochs:
            return
        metrics = ", ".join(f"{name} {float(value):.4f}" for name, value in sorted(trainer.callback_metrics.items())
                            if name.endswith(("_epoch", "val_acc")))
        print(f"{type(module).__name__} epoch {epoch}/{trainer.max_epochs}: {metrics}", flush=True)


def trainer(stage: str, epochs: int, out: Path, smoke: bool) -> pl.Trainer:
    limit = SMOKE_BATCHES if smoke else 1.0
    return pl.Trainer(max_epochs=epochs, accelerator="auto", devices=1, logger=CSVLogger(out / "logs", name=stage),
                      callbacks=[EpochReport()], enable_checkpointing=False, enable_progress_bar=False,
                      enable_model_summary=False, limit_train_batches=limit, limit_val_batches=limit)


def predict(probe: LinearProbe, images: np.ndarray, transform, device: torch.device, workers: int) -> np.ndarray:
    probe.to(device).eval()
    with torch.no_grad():
        out = [probe(x.to(device)).argmax(dim=1).cpu()
               for x in DataLoader(Images(images, None, transform), batch_size=BATCH_SIZE, shuffle=False,
                                   num_workers=workers)]
    return torch.cat(out).numpy().astype(np.int64)


def pretrain_and_probe(images, labels, train_pos, val_pos, out: Path, smoke: bool, workers: int) -> LinearProbe:
    epochs, batch_size = (1, SMOKE_BATCH) if smoke else (MAX_EPOCHS, BATCH_SIZE)
    train_images, train_labels = images[train_pos], labels[train_pos]

    def loader(dataset: Dataset, training: bool) -> DataLoader:
        return DataLoader(dataset, batch_size=batch_size, shuffle=training, drop_last=training, num_workers=workers)

    model = EvolvingModel(lr=LR, memory_bank_size=MEMORY_BANK_SIZE, max_epochs=epochs)
    print(f"pre-training for {epochs} epochs on {len(train_pos)} images", flush=True)
    trainer("pretrain", epochs, out, smoke).fit(
        model, loader(Images(train_images, train_labels, EvolvingTransform(input_size=32, gaussian_blur=0.0)), True))
    CHECKPOINT.mkdir(exist_ok=True)
    torch.save(model.state_dict(), CHECKPOINT / "backbone.pt")

    model.eval()
    probe = LinearProbe(model.backbone, epochs)
    print(f"linear probe for {epochs} epochs", flush=True)
    trainer("linear_probing", epochs, out, smoke).fit(
        probe, loader(Images(train_images, train_labels, PROBE_AUGMENT), True),
        loader(Images(images[val_pos], labels[val_pos], EVALUATE), False))
    torch.save(probe.state_dict(), CHECKPOINT / "classifier.pt")
    return probe


def restore(device: torch.device) -> LinearProbe:
    for name in ("backbone.pt", "classifier.pt"):
        if not (CHECKPOINT / name).is_file():
            sys.exit(f"train.py: no model_checkpoint/{name}: the test run needs the val run's checkpoint")
    model = EvolvingModel(lr=LR, memory_bank_size=MEMORY_BANK_SIZE, max_epochs=MAX_EPOCHS)
    model.load_state_dict(torch.load(CHECKPOINT / "backbone.pt", map_location=device))
    model.eval()
    probe = LinearProbe(model.backbone, MAX_EPOCHS)
    probe.load_state_dict(torch.load(CHECKPOINT / "classifier.pt", map_location=device))
    return probe


def main() -> None:
    args = harness_args()
    if args.out is None:
        sys.exit("train.py: --out is required")
    smoke = args.scale == "smoke"
    pl.seed_everything(SEED, verbose=False)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    workers = 0 if smoke else min(WORKERS, os.cpu_count() or 1)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.split == "val":
        images, labels = np.load("data/visible_images.npy"), np.load("data/visible_labels.npy")
        train_pos, val_pos = original_split_indices(len(images), load_split_config(Path.cwd(), OriginalSplitConfig))
        if len(val_pos) == 0:
            sys.exit(f"train.py: split_config.json leaves no val image of {len(images)}")
        print(f"agent train: {len(train_pos)}, agent val: {len(val_pos)}", flush=True)
        probe = pretrain_and_probe(images, labels, train_pos, val_pos, args.out, smoke, workers)
        predicted = images[val_pos]
    else:
        probe = restore(device)
        predicted = np.load(args.out / "test_images.npy")
    predictions = predict(probe, predicted, EVALUATE, device, workers)
    np.save(args.out / "predictions.npy", predictions)
    write_json(args.out / "run_info.json", {"split": args.split, "scale": args.scale, "n_predicted": len(predictions)})
    print(f"[{args.split}] predicted {len(predictions)} images", flush=True)


if __name__ == "__main__":
    main()
