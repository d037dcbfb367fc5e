"""The few-shot classifier (editable): easyfsl's Prototypical Networks on frozen features.

train.py (protected) calls
    build_classifier(base_features, base_labels, config) -> easyfsl FewShotClassifier
once, then for every episode classifier.process_support_set(support, support_labels) and
classifier(query) -> scores (n_query, n_way), under model.eval() and torch.no_grad() as easyfsl's
evaluate() runs it (a method that needs gradients, like easyfsl's Finetune or TIM, enables them itself).
support / query are float tensors (n, 256) of the frozen encoder's features; support_labels are the
episode's labels 0..n_way-1. base_features (n_base, 256) / base_labels (n_base,) are the base classes'
features and class ids (the visible classes that split_config.json does not hold out for validation),
for any statistics, projection or meta-training a method wants. config is the dict in config.json.

Baseline: PrototypicalNetworks (Snell et al., 2017): class prototype = mean support feature, score =
minus the euclidean distance to it. The options in config.json are off in the baseline: a power
transform of the features, centering on the base classes' mean feature and L2 normalisation (easyfsl's
feature_centering / feature_normalization, as in SimpleShot's CL2N).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
import torch.nn as nn
from easyfsl.methods import FewShotClassifier, PrototypicalNetworks

CONFIG_PATH = Path(__file__).resolve().parent / "config.json"


def get_config() -> dict:
    return json.loads(CONFIG_PATH.read_text())


class PowerTransform(nn.Module):
    """x -> (x + eps) ** beta on non-negative features; beta = 1 leaves them as they are."""

    def __init__(self, beta: float, eps: float = 1e-6):
        super().__init__()
        self.beta, self.eps = beta, eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x if self.beta == 1.0 else (x.clamp(min=0) + self.eps) ** self.beta


def build_classifier(base_features: torch.Tensor, base_labels: torch.Tensor, config: dict) -> FewShotClassifier:
    backbone = PowerTransform(float(config.get("power", 1.0)))
    centering = backbone(base_features).mean(dim=0) if config.get("center_on_base_mean", False) else None
    normalization = 2 if config.get("l2_normalize", False) else None
    return PrototypicalNetworks(backbone, feature_centering=centering, feature_normalization=normalization)
