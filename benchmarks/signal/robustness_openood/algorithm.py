"""A hand-written better method for the signal table: the baseline CNN, wider (32) and trained twice as
long (30 epochs), scored by the Mahalanobis distance of its penultimate features to the nearest class
mean (a shared covariance) instead of by MSP.

MSP only looks at the classifier's confidence, and a ReLU network is confidently wrong far from its
training data (Hein et al. 2019), which is what a far-OOD source is. Feature-space detectors ask instead
how far an input's features lie from the training examples': the Mahalanobis score (Lee et al., NeurIPS
2018) and the deep nearest-neighbour score (Sun et al., ICML 2022) are both strong post-hoc detectors in
OpenOOD. Chosen on validation AUROC (held-out digits against letters), one training run each:
MSP 0.844 (the baseline), energy 0.877, KNN (k = 1) 0.946, Mahalanobis 0.950 with this network and
schedule; KNN 0.893 and Mahalanobis 0.861 with the baseline's. config.json's "score" picks the detector
("maha", "knn", "energy", "msp"), "knn_k" the neighbour.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F


class SmallCNN(nn.Module):
    """The baseline's network: two 3x3 convs, one 2x2 max-pool, a hidden layer, a linear classifier."""

    def __init__(self, num_classes: int, width: int):
        super().__init__()
        self.conv1 = nn.Conv2d(1, width, 3, padding=1)
        self.conv2 = nn.Conv2d(width, 2 * width, 3, padding=1)
        self.hidden = nn.Linear(2 * width * 4 * 4, 4 * width)
        self.fc = nn.Linear(4 * width, num_classes)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.conv1(x))
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return F.relu(self.hidden(x.flatten(1)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.features(x))


def build_model(num_classes: int, config: dict) -> nn.Module:
    return SmallCNN(num_classes, int(config["width"]))


def train_model(model: nn.Module, X: torch.Tensor, y: torch.Tensor, config: dict) -> None:
    """The baseline's training: cross-entropy, SGD with momentum, a cosine schedule."""
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
    """The training examples' normalised features (KNN), or their class means and shared precision (Mahalanobis)."""
    with torch.no_grad():
        feats = model.features(X_train)
    if config.get("score") == "knn":
        return F.normalize(feats, dim=1)
    if config.get("score") == "maha":
        means = torch.stack([feats[y_train == c].mean(0) for c in range(int(y_train.max()) + 1)])
        centred = feats - means[y_train]
        cov = centred.T @ centred / len(feats) + 1e-6 * torch.eye(feats.shape[1], device=feats.device)
        return means, torch.linalg.pinv(cov)
    return None


def id_score(model: nn.Module, detector, X: torch.Tensor, config: dict) -> torch.Tensor:
    """HIGHER = more in-distribution: minus the k-th neighbour distance, the energy's negative, ..."""
    score = config.get("score", "msp")
    with torch.no_grad():
        if score == "knn":
            query = F.normalize(model.features(X), dim=1)
            distances = torch.cdist(query, detector)
            return -distances.topk(int(config["knn_k"]), dim=1, largest=False).values[:, -1]
        if score == "maha":
            means, precision = detector
            diff = model.features(X)[:, None, :] - means[None]
            return -torch.einsum("nkd,de,nke->nk", diff, precision, diff).min(dim=1).values
        logits = model(X)
        if score == "energy":
            return config["temperature"] * torch.logsumexp(logits / config["temperature"], dim=1)
        return F.softmax(logits / config["temperature"], dim=1).max(dim=1).values
