"""Experiment driver (protected): FixMatch on CIFAR-100 with 200 labels, FML-bench's Data_Efficiency_usb protocol.

    python train.py --split val  --out OUT   train on data/ (200 labelled, 49,800 unlabelled images), save
                                             model_checkpoint/model.pt, predict data/val_images.npy
    python train.py --split test --out OUT   load model_checkpoint/ (no training), predict OUT/test_images.npy

Writes OUT/predictions.npy (int64 labels); the evaluator scores them with labels it keeps to itself. The
training loop is the original's: each step a labelled batch (weak augmentation, cross-entropy) and an
unlabelled batch whose weakly augmented view gives pseudo-labels (softmax at temperature T, kept above the
confidence threshold) for its strongly augmented view; loss = supervised + lambda_u * unsupervised; SGD
with Nesterov momentum and a cosine schedule over total_steps. algorithm.py supplies the network, the
hyper-parameters and the strong augmentation. --scale smoke runs two steps on batches of 8.
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

from pytest_fmlbench.evalkit import harness_args, write_json

import algorithm  # the editable method, next to this file

NUM_CLASSES = 100
NUM_LABELS = 200  # fixed by the harness's data, whatever the config says
SEED = 42
CHECKPOINT = Path("model_checkpoint")
MEAN, STD = (0.5071, 0.4867, 0.4408), (0.2675, 0.2565, 0.2761)
REQUIRED = ("total_steps", "batch_size_labeled", "batch_size_unlabeled", "lr", "momentum", "weight_decay",
            "threshold", "lambda_u", "T")
SMOKE_STEPS, SMOKE_BATCH = 2, 8

warnings.filterwarnings("ignore", category=UserWarning)


class Images(Dataset):
    """uint8 HWC images as PIL images (as torchvision's CIFAR100 yields them) through one or two transforms."""

    def __init__(self, images: np.ndarray, labels: np.ndarray | None, *transforms):
        self.images, self.labels, self.transforms = images, labels, transforms

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, i):
        image = Image.fromarray(self.images[i])
        views = [transform(image) for transform in self.transforms]
        if self.labels is not None:
            views.append(int(self.labels[i]))
        return tuple(views) if len(views) > 1 else views[0]


def transforms() -> tuple:
    weak = T.Compose([T.RandomHorizontalFlip(), T.RandomCrop(32, padding=4), T.ToTensor(), T.Normalize(MEAN, STD)])
    strong = T.Compose([T.RandomHorizontalFlip(), T.RandomCrop(32, padding=4), algorithm.RandAugment(n=2, m=10),
                        T.ToTensor(), T.Normalize(MEAN, STD)])
    return weak, strong, T.Compose([T.ToTensor(), T.Normalize(MEAN, STD)])


def config_for(scale: str) -> dict:
    config = dict(algorithm.get_training_config())
    missing = [key for key in REQUIRED if key not in config]
    if missing:
        sys.exit(f"train.py: get_training_config() has no {', '.join(map(repr, missing))}")
    if config.get("num_labels", NUM_LABELS) != NUM_LABELS:
        print(f"train.py: ignoring num_labels={config['num_labels']}; the data hold {NUM_LABELS} labels",
              file=sys.stderr)
    if scale == "smoke":
        config["total_steps"] = SMOKE_STEPS
        config["batch_size_labeled"] = min(int(config["batch_size_labeled"]), SMOKE_BATCH)
        config["batch_size_unlabeled"] = min(int(config["batch_size_unlabeled"]), SMOKE_BATCH)
    return config


def forever(loader: DataLoader):
    while True:
        yield from loader


def predict(model: torch.nn.Module, dataset: Dataset, device: torch.device, workers: int) -> np.ndarray:
    model.eval()
    with torch.no_grad():
        out = [model(x.to(device)).argmax(dim=1).cpu()
               for x in DataLoader(dataset, batch_size=256, shuffle=False, num_workers=workers)]
    return torch.cat(out).numpy().astype(np.int64)


def train(model: torch.nn.Module, config: dict, weak, strong, device: torch.device, workers: int) -> None:
    labelled = DataLoader(Images(np.load("data/labeled_images.npy"), np.load("data/labeled_labels.npy"), weak),
                          batch_size=int(config["batch_size_labeled"]), shuffle=True, num_workers=workers,
                          drop_last=True)
    unlabelled = DataLoader(Images(np.load("data/unlabeled_images.npy"), None, weak, strong),
                            batch_size=int(config["batch_size_unlabeled"]), shuffle=True, num_workers=workers,
                            drop_last=True)
    steps = int(config["total_steps"])
    optimizer = torch.optim.SGD(model.parameters(), lr=config["lr"], momentum=config["momentum"],
                                weight_decay=config["weight_decay"], nesterov=True)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=steps)
    report_every = int(config.get("eval_every", 1500)) or steps
    model.train()
    for step, ((x_l, y_l), (x_uw, x_us)) in enumerate(zip(forever(labelled), forever(unlabelled)), start=1):
        x_l, y_l, x_uw, x_us = x_l.to(device), y_l.to(device), x_uw.to(device), x_us.to(device)
        loss_l = F.cross_entropy(model(x_l), y_l)
        with torch.no_grad():
            confidence, pseudo = torch.softmax(model(x_uw) / config["T"], dim=1).max(dim=1)
            mask = confidence.ge(config["threshold"]).float()
        loss_u = (F.cross_entropy(model(x_us), pseudo, reduction="none") * mask).mean()
        loss = loss_l + config["lambda_u"] * loss_u
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scheduler.step()
        if step % report_every == 0 or step == steps:
            print(f"step {step}/{steps}: loss_l {loss_l.item():.4f}, loss_u {loss_u.item():.4f}, "
                  f"mask {mask.mean().item():.2f}", flush=True)
        if step == steps:
            return


def main() -> None:
    args = harness_args()
    if args.out is None:
        sys.exit("train.py: --out is required")
    torch.manual_seed(SEED)
    torch.cuda.manual_seed_all(SEED)
    np.random.seed(SEED)
    torch.backends.cudnn.deterministic = True
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    workers = 0 if args.scale == "smoke" else 2
    weak, strong, evaluate = transforms()
    args.out.mkdir(parents=True, exist_ok=True)
    model = algorithm.get_model(num_classes=NUM_CLASSES).to(device)
    if args.split == "val":
        config = config_for(args.scale)
        print(f"FixMatch for {config['total_steps']} steps", flush=True)
        train(model, config, weak, strong, device, workers)
        CHECKPOINT.mkdir(exist_ok=True)
        torch.save(model.state_dict(), CHECKPOINT / "model.pt")
        images = np.load("data/val_images.npy")
    else:
        if not (CHECKPOINT / "model.pt").is_file():
            sys.exit("train.py: no model_checkpoint/model.pt: the test run needs the val run's checkpoint")
        model.load_state_dict(torch.load(CHECKPOINT / "model.pt", map_location=device))
        images = np.load(args.out / "test_images.npy")
    predictions = predict(model, Images(images, None, evaluate), device, workers)
    np.save(args.out / "predictions.npy", predictions)
    write_json(args.out / "run_info.json", {"split": args.split, "scale": args.scale, "n_predicted": len(predictions)})


if __name__ == "__main__":
    main()
