"""The method: Synaptic Intelligence (Zenke, Poole & Ganguli, 2017) on a fully connected network, as in
GMvandeVen/continual-learning's class-incremental split-MNIST baseline.

train.py (protected) runs the contexts in order and calls
  get_config() -> dict                               hyper-parameters (config.json), incl. seed;
  build_learner(num_classes, config, device)         the learner object, built once;
  learner.learn_context(context, X, y, classes, seen_classes)
      X: float tensor (n, 1, 8, 8) in [0, 1], y: int64 tensor (n,), the current context's training
      data only; classes: the labels of this context; seen_classes: every label taught so far;
  learner.predict(X, seen_classes) -> int tensor/array (n,) of labels, each in seen_classes.
Rules (the original's): no raw training image may be kept once its context ends (no replay buffer;
train.py checks), the learner's torch modules may hold at most twice the baseline network's
parameters, and training time per context stays of the same order as the baseline's.
"""

import json
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

CONFIG_PATH = Path(__file__).resolve().parent / "config.json"


def get_config() -> dict:
    return json.loads(CONFIG_PATH.read_text())


class MLP(nn.Module):
    """The original's classifier for split-MNIST: fully connected hidden layers of fc_units with ReLU,
    one output unit per class (a single head shared by all contexts)."""

    def __init__(self, in_features: int, num_classes: int, fc_units: int, hidden_layers: int):
        super().__init__()
        layers, width = [], in_features
        for _ in range(hidden_layers):
            layers += [nn.Linear(width, fc_units), nn.ReLU()]
            width = fc_units
        self.features = nn.Sequential(nn.Flatten(), *layers)
        self.classifier = nn.Linear(width, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x))


class SILearner:
    """Cross-entropy over the classes seen so far plus SI's quadratic penalty: c * sum_i omega_i
    (theta_i - theta*_i)^2, where omega accumulates each parameter's contribution to the drop in loss
    along its training path (the path integral), divided by its squared total change plus epsilon."""

    def __init__(self, num_classes: int, config: dict, device: str):
        self.config = config
        self.device = device
        self.model = MLP(64, num_classes, config["fc_units"], config["hidden_layers"]).to(device)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=config["lr"], betas=(0.9, 0.999))
        self.omega: dict[str, torch.Tensor] = {}
        self.anchor: dict[str, torch.Tensor] = {}  # parameter values at the end of the previous context

    def _params(self):
        return [(n, p) for n, p in self.model.named_parameters() if p.requires_grad]

    def si_penalty(self) -> torch.Tensor:
        if not self.omega:
            return torch.zeros((), device=self.device)
        return sum((self.omega[n] * (p - self.anchor[n]) ** 2).sum() for n, p in self._params())

    def learn_context(self, context, X, y, classes, seen_classes) -> None:
        cfg = self.config
        X, y = X.to(self.device), y.to(self.device)
        active = torch.tensor(seen_classes, device=self.device)
        # class label -> column among the active output units
        target = torch.searchsorted(active, y) if bool((active[1:] > active[:-1]).all()) else \
            torch.tensor([seen_classes.index(int(c)) for c in y], device=self.device)
        path_integral = {n: torch.zeros_like(p) for n, p in self._params()}
        start = {n: p.detach().clone() for n, p in self._params()}
        previous = {n: p.detach().clone() for n, p in self._params()}
        self.model.train()
        order, cursor = torch.randperm(len(y)), 0
        for _ in range(int(cfg["iters"])):
            if cursor >= len(y):  # a new pass over the context's data
                order, cursor = torch.randperm(len(y)), 0
            batch = order[cursor:cursor + int(cfg["batch_size"])]
            cursor += len(batch)
            logits = self.model(X[batch])[:, active]
            loss = F.cross_entropy(logits, target[batch]) + cfg["si_c"] * self.si_penalty()
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            with torch.no_grad():
                for n, p in self._params():
                    if p.grad is not None:
                        path_integral[n] += -p.grad * (p.detach() - previous[n])
                    previous[n] = p.detach().clone()
        with torch.no_grad():
            for n, p in self._params():
                change = p.detach() - start[n]
                omega_add = path_integral[n] / (change ** 2 + cfg["si_epsilon"])
                self.omega[n] = self.omega.get(n, torch.zeros_like(p)) + omega_add
                self.anchor[n] = p.detach().clone()

    def predict(self, X, seen_classes) -> torch.Tensor:
        self.model.eval()
        active = torch.tensor(seen_classes, device=self.device)
        with torch.no_grad():
            logits = torch.cat([self.model(chunk.to(self.device))[:, active] for chunk in X.split(512)])
        return active[logits.argmax(dim=1)].cpu()


def build_learner(num_classes: int, config: dict, device: str) -> SILearner:
    return SILearner(num_classes, config, device)
