"""The defence: DP-InstaHide (Borgnia et al. 2021), as ART's DPInstaHideTrainer runs it.

Each training batch is mixed with Mixup (ART's Mixup preprocessor: one Dirichlet(alpha) weight
vector per batch over ``num_mix`` shuffled copies of the batch, labels mixed alike), then Laplacian
noise is added and the pixels are clipped back to [0, 1]; the model is trained on the result with
Adam. The mixing and the noise dilute a trigger, at a cost in clean accuracy.

train.py calls ``train_with_defence(X_train, y_train, config)`` once per backdoor, on that
backdoor's poisoned training set, and classifies the inputs to score with the returned module:
X_train is a float tensor (N, 1, 8, 8), pixels in [0, 1]; y_train int64 labels 0..9, about a third
of them poisoned (a trigger pasted on an image of class c, labelled (c + 1) mod 10) and not marked.
The returned module maps (M, 1, 8, 8) inputs to (M, 10) class scores; put any test-time defence
(input filtering, pruned neurons, ...) inside it. Change anything here: filter suspicious examples
(spectral signatures, activation clustering; ART's art.defences.detector.poison is installed),
train robustly, fine-prune, or build something new.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

NUM_CLASSES = 10


class SmallCNN(nn.Module):
    """The original's Keras MNIST model (conv, conv, max-pool, dropout, dense, dropout, dense), scaled to 8x8."""

    def __init__(self, width: int):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, width, 3, padding=1), nn.ReLU(),
            nn.Conv2d(width, 2 * width, 3, padding=1), nn.ReLU(),
            nn.MaxPool2d(2), nn.Dropout(0.25), nn.Flatten(),
            nn.Linear(2 * width * 4 * 4, 4 * width), nn.ReLU(),
        )
        self.classifier = nn.Sequential(nn.Dropout(0.5), nn.Linear(4 * width, NUM_CLASSES))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x))


def build_model(config: dict) -> nn.Module:
    return SmallCNN(int(config["width"]))


def mixup(x: torch.Tensor, y: torch.Tensor, num_mix: int, alpha: float) -> tuple[torch.Tensor, torch.Tensor]:
    """ART's Mixup: one weight vector per batch, each extra term a random permutation of the batch."""
    weights = torch.distributions.Dirichlet(torch.full((num_mix,), float(alpha))).sample()
    x_mix, y_mix = weights[0] * x, weights[0] * y
    for weight in weights[1:]:
        order = torch.randperm(len(x), device=x.device)
        x_mix = x_mix + weight * x[order]
        y_mix = y_mix + weight * y[order]
    return x_mix, y_mix


def add_noise(x: torch.Tensor, scale: float) -> torch.Tensor:
    """Laplacian noise, clipped to the valid pixel range (DPInstaHideTrainer's noise='laplacian')."""
    noise = torch.distributions.Laplace(0.0, float(scale)).sample(x.shape).to(x.device)
    return (x + noise).clamp(0.0, 1.0)


def train_with_defence(X: torch.Tensor, y: torch.Tensor, config: dict) -> nn.Module:
    model = build_model(config).to(X.device)
    optimizer = torch.optim.Adam(model.parameters(), lr=config["lr"])
    targets = F.one_hot(y, NUM_CLASSES).float()
    batch_size = int(config["batch_size"])
    model.train()
    for _ in range(int(config["epochs"])):
        order = torch.randperm(len(X), device=X.device)
        for start in range(0, len(X), batch_size):
            batch = order[start:start + batch_size]
            x_aug, y_aug = mixup(X[batch], targets[batch], int(config["num_mix"]), config["mixup_alpha"])
            x_aug = add_noise(x_aug, config["noise_scale"])
            # cross-entropy against the mixed (soft) labels
            loss = -(y_aug * F.log_softmax(model(x_aug), dim=1)).sum(dim=1).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return model.eval()
