"""Experiment driver (protected): DP-SGD with Opacus on CIFAR-10, FML-bench's Privacy_opacus protocol.

    python train.py --split val  --out OUT   train on the train part of data/ (split_config.json), save
                                             model_checkpoint/, predict the val part
    python train.py --split test --out OUT   load model_checkpoint/ (no training), predict OUT/test_images.npy

Writes OUT/predictions.npy (int64 labels) and OUT/dp_config.json (the DP-SGD parameters the training
used; the evaluator recomputes epsilon from them). --scale smoke trains one epoch of at most two
batches, for checking the code path on fixture data.
"""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
import torchvision.transforms as T
from opacus import PrivacyEngine
from torch.utils.data import DataLoader, Dataset

from pytest_fmlbench.evalkit import harness_args, load_split_config, original_split_indices, write_json

import algorithm  # the editable method, next to this file

# The budget belongs to the benchmark: algorithm.py cannot change it.
TARGET_EPSILON = 8.0
TARGET_DELTA = 1e-5
ACCOUNTANT = "prv"  # Opacus's default, as in the original
NUM_CLASSES = 10
SEED = 42
CHECKPOINT = Path("model_checkpoint")
MEAN, STD = (0.4914, 0.4822, 0.4465), (0.2023, 0.1994, 0.2010)
SMOKE_STEPS = 2

warnings.filterwarnings("ignore", message=".*[Ss]ecure RNG.*")
warnings.filterwarnings("ignore", message=".*Full backward hook is firing.*")
warnings.filterwarnings("ignore", message=".*Optimal order is the (largest|smallest) alpha.*")


class Images(Dataset):
    """uint8 HWC images -> float CHW in [0, 1] -> transform."""

    def __init__(self, images: np.ndarray, labels: np.ndarray | None, transform):
        self.images, self.labels, self.transform = images, labels, transform

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, i):
        x = self.transform(torch.from_numpy(self.images[i]).permute(2, 0, 1).float().div(255))
        return (x, int(self.labels[i])) if self.labels is not None else x


def transforms() -> tuple:
    train = getattr(algorithm, "get_train_transform", None)
    evaluate = getattr(algorithm, "get_eval_transform", None)
    default_eval = T.Normalize(MEAN, STD)
    default_train = T.Compose([T.RandomCrop(32, padding=4), T.RandomHorizontalFlip(), T.Normalize(MEAN, STD)])
    return (train() if train else default_train), (evaluate() if evaluate else default_eval)


def config_for(scale: str, n_train: int) -> dict:
    config = dict(algorithm.get_training_config())
    for key in ("epochs", "lr", "max_grad_norm", "batch_size"):
        if key not in config:
            sys.exit(f"train.py: get_training_config() has no {key!r}")
    for key in ("target_epsilon", "target_delta"):
        if key in config and config[key] != {"target_epsilon": TARGET_EPSILON, "target_delta": TARGET_DELTA}[key]:
            print(f"train.py: ignoring {key}={config[key]}; the budget is fixed at epsilon={TARGET_EPSILON}, "
                  f"delta={TARGET_DELTA}", file=sys.stderr)
    config["epochs"], config["batch_size"] = int(config["epochs"]), int(config["batch_size"])
    if config["epochs"] < 1 or config["batch_size"] < 1 or not float(config["max_grad_norm"]) > 0:
        sys.exit("train.py: epochs and batch_size must be >= 1 and max_grad_norm > 0")
    if scale == "smoke":
        config["epochs"], config["batch_size"] = 1, min(config["batch_size"], max(2, n_train // 4))
    if n_train // config["batch_size"] < 1:
        sys.exit(f"train.py: batch_size {config['batch_size']} exceeds the {n_train} training examples")
    return config


def predict(model: nn.Module, dataset: Dataset, device: torch.device, workers: int) -> np.ndarray:
    model.eval()
    out = []
    with torch.no_grad():
        for x in DataLoader(dataset, batch_size=256, shuffle=False, num_workers=workers):
            x = x[0] if isinstance(x, (list, tuple)) else x
            out.append(model(x.to(device)).argmax(dim=1).cpu())
    return torch.cat(out).numpy().astype(np.int64)


def train(images, labels, config: dict, train_transform, device, workers: int, smoke: bool) -> tuple[nn.Module, dict]:
    model = algorithm.get_model(NUM_CLASSES).to(device)
    if hasattr(algorithm, "get_optimizer"):
        optimizer = algorithm.get_optimizer(model.parameters(), config)
    else:
        optimizer = torch.optim.SGD(model.parameters(), lr=config["lr"], momentum=config.get("momentum", 0.0))
    loader = DataLoader(Images(images, labels, train_transform), batch_size=config["batch_size"], shuffle=True,
                        num_workers=workers, drop_last=True)
    engine = PrivacyEngine(accountant=ACCOUNTANT)
    model, optimizer, loader = engine.make_private_with_epsilon(
        module=model, optimizer=optimizer, data_loader=loader, epochs=config["epochs"],
        target_epsilon=TARGET_EPSILON, target_delta=TARGET_DELTA, max_grad_norm=float(config["max_grad_norm"]),
        poisson_sampling=True,
    )
    criterion = nn.CrossEntropyLoss()
    steps = 0
    for epoch in range(config["epochs"]):
        model.train()
        total, correct, loss_sum = 0, 0, 0.0
        for x, y in loader:
            if smoke and steps == SMOKE_STEPS:
                break
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad()
            logits = model(x)
            loss = criterion(logits, y)
            loss.backward()
            optimizer.step()
            steps += 1
            loss_sum += loss.item() * len(y)
            total += len(y)
            correct += (logits.argmax(1) == y).sum().item()
        print(f"epoch {epoch + 1}/{config['epochs']}: loss {loss_sum / max(total, 1):.4f}, "
              f"train acc {correct / max(total, 1):.4f}", flush=True)
    history = engine.accountant.history
    if len(history) != 1:
        sys.exit(f"train.py: expected one constant DP-SGD phase, the accountant recorded {history}")
    sigma, rate, accounted = history[0]
    record = {"accountant": ACCOUNTANT, "noise_multiplier": float(sigma), "sample_rate": float(rate),
              "steps": int(accounted), "epochs": config["epochs"], "batch_size": config["batch_size"],
              "n_train": len(images), "max_grad_norm": float(config["max_grad_norm"]), "delta": TARGET_DELTA,
              "target_epsilon": TARGET_EPSILON, "poisson_sampling": True,
              "epsilon_reported": float(engine.get_epsilon(TARGET_DELTA))}
    print(f"noise_multiplier {sigma:.4f}, sample_rate {rate:.6f}, steps {accounted}, "
          f"epsilon {record['epsilon_reported']:.4f}", flush=True)
    return model._module if hasattr(model, "_module") else model, record


def main() -> None:
    args = harness_args()
    if args.out is None:
        sys.exit("train.py: --out is required")
    torch.manual_seed(SEED)
    np.random.seed(SEED)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    smoke = args.scale == "smoke"
    workers = 0 if smoke else 2
    train_transform, eval_transform = transforms()
    args.out.mkdir(parents=True, exist_ok=True)

    if args.split == "val":
        images = np.load("data/visible_images.npy")
        labels = np.load("data/visible_labels.npy")
        train_pos, val_pos = original_split_indices(len(images), load_split_config(Path.cwd()))
        print(f"train {len(train_pos)}, val {len(val_pos)}", flush=True)
        config = config_for(args.scale, len(train_pos))
        model, record = train(images[train_pos], labels[train_pos], config, train_transform, device, workers, smoke)
        CHECKPOINT.mkdir(exist_ok=True)
        torch.save(model.state_dict(), CHECKPOINT / "model.pt")
        write_json(CHECKPOINT / "dp_config.json", record)
        eval_set = Images(images[val_pos], None, eval_transform)
    else:
        if not (CHECKPOINT / "model.pt").is_file():
            sys.exit("train.py: no model_checkpoint/model.pt: the test run needs the val run's checkpoint")
        model = algorithm.get_model(NUM_CLASSES).to(device)
        model.load_state_dict(torch.load(CHECKPOINT / "model.pt", map_location=device))
        record = json.loads((CHECKPOINT / "dp_config.json").read_text())
        eval_set = Images(np.load(args.out / "test_images.npy"), None, eval_transform)
    np.save(args.out / "predictions.npy", predict(model, eval_set, device, workers))
    write_json(args.out / "dp_config.json", record)


if __name__ == "__main__":
    main()
