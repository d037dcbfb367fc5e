"""The evaluator's fixed linear-probe protocol: frozen features it extracts itself, then a linear
classifier fitted on the probe-train images' labels.

The original trains a linear layer with SGD for 100 epochs on frozen ResNet features. Here the
classifier is the same model, fitted to convergence: multinomial logistic regression with an L2
penalty (scikit-learn's objective at C = 1: sum of cross-entropies + ||W||^2 / 2), minimised by
full-batch L-BFGS in float64 on standardised features. It is deterministic, takes well under a
second on CPU, and is blind to the features' scale (an encoder cannot win by inflating activations).
"""

from __future__ import annotations

import numpy as np
import torch

import encoder

C = 1.0
MAX_ITER = 500
CHUNK = 500


def extract(backbone: torch.nn.Module, images: np.ndarray) -> torch.Tensor:
    """Features (float64) of uint8 images (N, 16, 16, 3), with the backbone in eval mode."""
    backbone.eval()
    pixels = torch.from_numpy(images).permute(0, 3, 1, 2).float().div(255)
    with torch.no_grad():
        return torch.cat([backbone(encoder.normalise(chunk)) for chunk in pixels.split(CHUNK)]).double()


def fit_and_score(train_features: torch.Tensor, train_labels: np.ndarray, eval_features: torch.Tensor,
                  eval_labels: np.ndarray, n_classes: int) -> tuple[float, float]:
    """(accuracy on the eval images, accuracy on the probe's own training images)."""
    mean = train_features.mean(dim=0)
    std = train_features.std(dim=0, unbiased=False)
    std = torch.where(std > 1e-12, std, torch.ones_like(std))  # a constant feature stays 0
    x_train = (train_features - mean) / std
    x_eval = (eval_features - mean) / std
    y_train = torch.from_numpy(train_labels)

    weight = torch.zeros(x_train.shape[1], n_classes, dtype=torch.float64, requires_grad=True)
    bias = torch.zeros(n_classes, dtype=torch.float64, requires_grad=True)
    optimizer = torch.optim.LBFGS([weight, bias], lr=1, max_iter=MAX_ITER, tolerance_grad=1e-9,
                                  tolerance_change=1e-12, history_size=20, line_search_fn="strong_wolfe")

    def objective() -> torch.Tensor:
        optimizer.zero_grad()
        loss = C * torch.nn.functional.cross_entropy(x_train @ weight + bias, y_train, reduction="sum")
        loss = loss + 0.5 * (weight * weight).sum()
        loss.backward()
        return loss

    optimizer.step(objective)
    with torch.no_grad():
        eval_acc = ((x_eval @ weight + bias).argmax(dim=1).numpy() == eval_labels).mean()
        train_acc = ((x_train @ weight + bias).argmax(dim=1).numpy() == train_labels).mean()
    return float(eval_acc), float(train_acc)
