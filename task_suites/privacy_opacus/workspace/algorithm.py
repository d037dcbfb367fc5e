"""The method: a small CNN trained with DP-SGD on 8x8 handwritten digits.

train.py (protected) imports this module and calls
  get_model(num_classes) -> torch.nn.Module       the network; it must be Opacus-compatible
                                                  (no BatchNorm: use GroupNorm/LayerNorm or none);
  get_training_config()  -> dict                  lr, epochs, batch_size, max_grad_norm, seed, ...;
  get_optimizer(params, config) (optional)        the non-private optimizer that Opacus wraps.
Inputs arrive as float tensors of shape (N, 1, 8, 8) with pixel values scaled to [0, 1].
The privacy budget (epsilon=8, delta=1e-5) is fixed by train.py and cannot be changed here.
"""

import json
from pathlib import Path

import torch
import torch.nn as nn

CONFIG_PATH = Path(__file__).resolve().parent / "config.json"


class SmallCNN(nn.Module):
    """Two conv blocks and a linear head; GroupNorm because BatchNorm mixes examples in a batch,
    which per-example gradient clipping (and so DP-SGD) cannot account for."""

    def __init__(self, num_classes: int = 10, width: int = 16):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, width, kernel_size=3, padding=1),
            nn.GroupNorm(4, width),
            nn.ReLU(),
            nn.MaxPool2d(2),  # 8x8 -> 4x4
            nn.Conv2d(width, 2 * width, kernel_size=3, padding=1),
            nn.GroupNorm(4, 2 * width),
            nn.ReLU(),
            nn.MaxPool2d(2),  # 4x4 -> 2x2
        )
        self.classifier = nn.Linear(2 * width * 2 * 2, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.features(x), 1))


def get_training_config() -> dict:
    """Hyper-parameters, read from config.json so they can be tuned without touching code."""
    return json.loads(CONFIG_PATH.read_text())


def get_model(num_classes: int = 10) -> nn.Module:
    return SmallCNN(num_classes=num_classes, width=int(get_training_config().get("width", 16)))


def get_optimizer(params, config: dict) -> torch.optim.Optimizer:
    name = config.get("optimizer", "sgd").lower()
    if name == "sgd":
        return torch.optim.SGD(params, lr=config["lr"], momentum=config.get("momentum", 0.9))
    if name == "adam":
        return torch.optim.Adam(params, lr=config["lr"])
    raise ValueError(f"unknown optimizer {name!r} (expected 'sgd' or 'adam')")
