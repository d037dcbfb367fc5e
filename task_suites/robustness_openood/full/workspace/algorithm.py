"""The OOD detector (editable): the classifier, its training hyper-parameters and the OOD score.

Baseline, as in FML-bench's Robustness_openood: MSP (maximum softmax probability, Hendrycks & Gimpel 2017)
on a ResNet-18 for 32x32 images (torchvision's ResNet-18 with a 3x3 stride-1 first convolution and no max
pooling), trained on CIFAR-10 for 100 epochs at batch size 128 with SGD (lr 0.1, momentum 0.9, weight decay
5e-4), the learning rate divided by 10 after epochs 50, 75 and 90.

Exports (train.py uses all three):
  get_model(num_classes) -> torch.nn.Module      maps normalised (N, 3, 32, 32) images to (N, num_classes)
                                                 logits
  get_training_config() -> dict                  epochs, batch_size, lr, momentum, weight_decay,
                                                 lr_milestones, lr_gamma
  compute_ood_score(model, x) -> tensor (N,)     for a batch of normalised images x; HIGHER = MORE LIKELY
                                                 IN-DISTRIBUTION

Ideas: energy score, ODIN, ReAct, ASH, Mahalanobis or KNN on the penultimate features (get_features below;
data/visible_images.npy holds the visible CIFAR-10 images), a different architecture or training recipe.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision.models as models


class ResNet18CIFAR(nn.Module):
    """torchvision's ResNet-18 adapted to 32x32 inputs; the classifier head kept apart from the features."""

    def __init__(self, num_classes: int = 10):
        super().__init__()
        backbone = models.resnet18(weights=None)
        backbone.conv1 = nn.Conv2d(3, 64, kernel_size=3, stride=1, padding=1, bias=False)
        backbone.maxpool = nn.Identity()
        self.feature_dim = backbone.fc.in_features
        backbone.fc = nn.Identity()
        self.backbone = backbone
        self.fc = nn.Linear(self.feature_dim, num_classes)

    def forward(self, x):
        return self.fc(self.backbone(x))

    def get_features(self, x):
        """The penultimate (pooled, 512-d) features."""
        return self.backbone(x)


def get_model(num_classes: int = 10) -> nn.Module:
    return ResNet18CIFAR(num_classes=num_classes)


def get_training_config() -> dict:
    return {
        "epochs": 100,
        "batch_size": 128,
        "lr": 0.1,
        "momentum": 0.9,
        "weight_decay": 5e-4,
        "lr_milestones": [50, 75, 90],
        "lr_gamma": 0.1,
    }


def compute_ood_score(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """MSP: the largest class probability (higher = more likely in-distribution)."""
    with torch.no_grad():
        return F.softmax(model(x), dim=1).max(dim=1).values
