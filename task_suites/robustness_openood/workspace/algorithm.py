"""The method: a small CNN classifier of the in-distribution digits, scored with MSP.

MSP (maximum softmax probability, Hendrycks & Gimpel 2017) is OpenOOD's simplest baseline: the more
confident the classifier, the more in-distribution the input. train.py calls, in order:

    model = build_model(num_classes, config)
    train_model(model, X_train, y_train, config)
    detector = fit_detector(model, X_train, y_train, config)
    scores = id_score(model, detector, X, config)          # once per batch of inputs to score

X_* are float tensors of shape (N, 1, 8, 8) with pixels in [0, 1], y_train int64 class labels 0..9,
all on train.py's device (model.to(device) is done for you). ``model(X)`` must return class logits
(train.py takes their argmax as the predicted class). ``id_score`` must return a tensor of shape
(N,) where HIGHER means MORE LIKELY IN-DISTRIBUTION. Change anything here: the architecture, the
training (outlier exposure, label smoothing, augmentation, ...), or the score (energy, ODIN, ReAct,
ASH, Mahalanobis, KNN, ViM, ...). pytorch-ood 0.4 is installed: its detectors (pytorch_ood.detector)
return OUTLIER scores, higher = more OOD, so negate them here.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F


class SmallCNN(nn.Module):
    """Two 3x3 conv layers, one 2x2 max-pool, a hidden layer, a linear classifier."""

    def __init__(self, num_classes: int, width: int):
        super().__init__()
        self.conv1 = nn.Conv2d(1, width, 3, padding=1)
        self.conv2 = nn.Conv2d(width, 2 * width, 3, padding=1)
        self.hidden = nn.Linear(2 * width * 4 * 4, 4 * width)
        self.fc = nn.Linear(4 * width, num_classes)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """Penultimate-layer features (what feature-space detectors work on)."""
        x = F.relu(self.conv1(x))
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return F.relu(self.hidden(x.flatten(1)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.features(x))


def build_model(num_classes: int, config: dict) -> nn.Module:
    return SmallCNN(num_classes, int(config["width"]))


def train_model(model: nn.Module, X: torch.Tensor, y: torch.Tensor, config: dict) -> None:
    """Plain cross-entropy with SGD + momentum and a cosine learning-rate schedule."""
    optimizer = torch.optim.SGD(model.parameters(), lr=config["lr"], momentum=config["momentum"],
                                weight_decay=config["weight_decay"])
    epochs, batch_size = int(config["epochs"]), int(config["batch_size"])
    steps_per_epoch = -(-len(X) // batch_size)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=epochs * steps_per_epoch)
    model.train()
    for _ in range(epochs):
        order = torch.randperm(len(X), device=X.device)
        for start in range(0, len(X), batch_size):
            batch = order[start:start + batch_size]
            loss = F.cross_entropy(model(X[batch]), y[batch])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            schedule.step()


def fit_detector(model: nn.Module, X_train: torch.Tensor, y_train: torch.Tensor, config: dict):
    """State a detector needs from the training data (class means, a feature bank, ...); MSP needs none."""
    return None


def id_score(model: nn.Module, detector, X: torch.Tensor, config: dict) -> torch.Tensor:
    """Maximum softmax probability at temperature T (T = 1 is plain MSP)."""
    with torch.no_grad():
        logits = model(X)
    return F.softmax(logits / config["temperature"], dim=1).max(dim=1).values
