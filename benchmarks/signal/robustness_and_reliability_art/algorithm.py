"""A hand-written better defence for the signal table: activation clustering (Chen et al., "Detecting
Backdoor Attacks on Deep Neural Networks by Activation Clustering", 2018; ART's ActivationDefence),
then plain training on what is left.

DP-InstaHide dilutes a trigger with Mixup and noise and pays for it in clean accuracy, and still learns
a trigger a third of the labels teach. Activation clustering removes the poisons instead: a network
trained on the poisoned pool separates, within each label, the genuine examples of that class from the
triggered examples of the class before it, because it has to recognise both the trigger and the
original digit to fit them; their penultimate activations form two clusters. Per label, the activations
are reduced by PCA and split by 2-means; the smaller cluster is dropped as poison when it holds at least
``min_poison_fraction`` of the label (a clean label splits unevenly or not at all). A fresh network is
then trained on the remaining examples without Mixup or noise, so clean accuracy is not sacrificed.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from sklearn.cluster import KMeans
from sklearn.decomposition import PCA

NUM_CLASSES = 10


class SmallCNN(nn.Module):
    """The baseline's network (the original's Keras MNIST model scaled to 8x8)."""

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


def train_plain(X: torch.Tensor, y: torch.Tensor, config: dict, epochs: int) -> nn.Module:
    """Cross-entropy with Adam, the baseline's optimiser and batch size, no Mixup or noise."""
    model = SmallCNN(int(config["width"])).to(X.device)
    optimizer = torch.optim.Adam(model.parameters(), lr=config["lr"])
    batch_size = int(config["batch_size"])
    model.train()
    for _ in range(epochs):
        order = torch.randperm(len(X), device=X.device)
        for start in range(0, len(X), batch_size):
            batch = order[start:start + batch_size]
            loss = F.cross_entropy(model(X[batch]), y[batch])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return model.eval()


def suspected_poisons(model: nn.Module, X: torch.Tensor, y: torch.Tensor, config: dict) -> np.ndarray:
    """A boolean mask: the smaller activation cluster of each label, where it is large enough to be a poison."""
    with torch.no_grad():
        activations = model.features(X).cpu().numpy()
    labels = y.cpu().numpy()
    seed = int(config.get("seed", 0))
    flagged = np.zeros(len(labels), dtype=bool)
    for label in range(NUM_CLASSES):
        members = np.flatnonzero(labels == label)
        if len(members) < 4:
            continue
        components = min(int(config["pca_components"]), len(members) - 1, activations.shape[1])
        reduced = PCA(n_components=components, random_state=seed).fit_transform(activations[members])
        clusters = KMeans(n_clusters=2, n_init=10, random_state=seed).fit_predict(reduced)
        smaller = int(np.argmin(np.bincount(clusters, minlength=2)))
        if np.mean(clusters == smaller) >= float(config["min_poison_fraction"]):
            flagged[members[clusters == smaller]] = True
    return flagged


def train_with_defence(X: torch.Tensor, y: torch.Tensor, config: dict) -> nn.Module:
    detector = train_plain(X, y, config, int(config["detector_epochs"]))
    keep = torch.from_numpy(~suspected_poisons(detector, X, y, config)).to(X.device)
    print(f"activation clustering: dropped {int((~keep).sum())} of {len(y)} training examples", flush=True)
    return train_plain(X[keep], y[keep], config, int(config["epochs"]))
