"""The network (editable): FML-bench's Robustness_and_Reliability_art model, in PyTorch.

The original's Keras model: Conv2D(32, 3x3, relu) -> Conv2D(64, 3x3, relu) -> MaxPool(2) -> Dropout(0.25)
-> Flatten -> Dense(128, relu) -> Dropout(0.5) -> Dense(10, softmax), categorical cross-entropy, Adam
(Keras's defaults: lr 0.001, epsilon 1e-7), Glorot-uniform weights and zero biases.

Exports (train.py wraps them in ART's PyTorchClassifier):
  get_model() -> torch.nn.Module        maps float (N, 1, 28, 28) images in [0, 1] to (N, 10) class scores
  get_loss() -> torch.nn.modules.loss._Loss   called with (scores, soft labels (N, 10)); it must honour
                                              `reduction` ("mean", "sum", "none"), which ART sets
  get_optimizer(model) -> torch.optim.Optimizer
"""

import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self, num_classes: int = 10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 32, kernel_size=3), nn.ReLU(),
            nn.Conv2d(32, 64, kernel_size=3), nn.ReLU(),
            nn.MaxPool2d(2), nn.Dropout(0.25),
        )
        self.classifier = nn.Sequential(
            nn.Flatten(), nn.Linear(64 * 12 * 12, 128), nn.ReLU(), nn.Dropout(0.5), nn.Linear(128, num_classes),
        )
        for layer in self.modules():
            if isinstance(layer, (nn.Conv2d, nn.Linear)):
                nn.init.xavier_uniform_(layer.weight)
                nn.init.zeros_(layer.bias)

    def forward(self, x):
        return self.classifier(self.features(x))


class SoftCrossEntropy(nn.modules.loss._Loss):
    """Cross-entropy against probability labels (Mixup's mixed one-hot labels), on raw scores."""

    def forward(self, scores: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        losses = -(target * torch.log_softmax(scores, dim=1)).sum(dim=1)
        if self.reduction == "mean":
            return losses.mean()
        return losses.sum() if self.reduction == "sum" else losses


def get_model() -> nn.Module:
    return Net()


def get_loss() -> nn.modules.loss._Loss:
    return SoftCrossEntropy()


def get_optimizer(model: nn.Module) -> torch.optim.Optimizer:
    return torch.optim.Adam(model.parameters(), lr=1e-3, eps=1e-7)
