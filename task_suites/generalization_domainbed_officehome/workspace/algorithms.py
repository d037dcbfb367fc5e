"""The domain-generalization method (editable), after DomainBed's algorithms.py.

train.py (protected) calls
    build_algorithm(input_shape, num_classes, num_domains, hparams) -> Algorithm
and then, once per step, algorithm.update(minibatches) with one (x, y) minibatch per training
environment (x: float (B, 3, 16, 16) in [0, 1], y: int64 (B,)), and finally algorithm.predict(x) ->
logits (N, num_classes) for the evaluation images. hparams is the dict in hparams.json.
The baseline is DomainBed's ERM: pool the environments' minibatches and minimise the average
cross-entropy with Adam. Any DomainBed-style method (IRM, VREx, GroupDRO, CORAL, Mixup, MixStyle,
augmentation inside update, ...) fits this interface: it sees which training domain each minibatch
comes from, never the held-out domain.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

import networks


class Algorithm(nn.Module):
    """A subclass implements update() (one training step) and predict() (logits)."""

    def __init__(self, input_shape, num_classes: int, num_domains: int, hparams: dict):
        super().__init__()
        self.hparams = hparams

    def update(self, minibatches: list[tuple[torch.Tensor, torch.Tensor]], unlabeled=None) -> dict:
        raise NotImplementedError

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError


class ERM(Algorithm):
    """Empirical Risk Minimization (Vapnik, 1998)."""

    def __init__(self, input_shape, num_classes: int, num_domains: int, hparams: dict):
        super().__init__(input_shape, num_classes, num_domains, hparams)
        self.featurizer = networks.Featurizer(input_shape, hparams)
        self.classifier = networks.Classifier(self.featurizer.n_outputs, num_classes, hparams)
        self.network = nn.Sequential(self.featurizer, self.classifier)
        self.optimizer = torch.optim.Adam(self.network.parameters(), lr=hparams["lr"],
                                          weight_decay=hparams["weight_decay"])

    def update(self, minibatches, unlabeled=None) -> dict:
        all_x = torch.cat([x for x, _ in minibatches])
        all_y = torch.cat([y for _, y in minibatches])
        loss = F.cross_entropy(self.predict(all_x), all_y)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return {"loss": loss.item()}

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return self.network(x)


def build_algorithm(input_shape, num_classes: int, num_domains: int, hparams: dict) -> Algorithm:
    return ERM(input_shape, num_classes, num_domains, hparams)
