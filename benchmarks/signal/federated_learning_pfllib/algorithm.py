"""A hand-written better method for the signal table: FedAvg on the same FedAvgCNN with GroupNorm after
each convolution, and more local work per round (30 rounds of 2 local epochs instead of 20 of 1).

The baseline's network has no normalisation: at lr 0.05 over 20 rounds of about four local steps, the
global model is still far from fitting the 8x8 digits when the rounds run out (val 0.47). GroupNorm
speeds up and steadies that optimisation without batch statistics, which under label skew would differ
from client to client and break the averaged model (Hsieh et al., "The Non-IID Data Quagmire of
Decentralized Machine Learning", ICML 2020, replace BatchNorm by GroupNorm for this reason). With the
normalised network, more local epochs per round and a few more rounds then pay off instead of drifting.
A balanced-softmax local loss (FedLC-style logit adjustment) and server momentum (FedAvgM) were tried on
validation and left out: neither helped on top of this (0.949 with the logit adjustment vs 0.972 without).
"""

import json
from pathlib import Path

import torch
import torch.nn as nn

CONFIG_PATH = Path(__file__).resolve().parent / "config.json"
GROUPS = 8


def get_fl_config() -> dict:
    """Hyper-parameters, read from config.json so they can be tuned without touching code."""
    return json.loads(CONFIG_PATH.read_text())


class FedAvgCNN(nn.Module):
    """The baseline's FedAvgCNN (32 and 64 channels, a 512-unit hidden layer, a linear head) with a
    GroupNorm after each convolution."""

    def __init__(self, in_features: int = 1, num_classes: int = 10, dim: int = 64 * 2 * 2):
        super().__init__()
        self.conv1 = nn.Sequential(nn.Conv2d(in_features, 32, kernel_size=3, padding=1), nn.GroupNorm(GROUPS, 32),
                                   nn.ReLU(inplace=True), nn.MaxPool2d(2))
        self.conv2 = nn.Sequential(nn.Conv2d(32, 64, kernel_size=3, padding=1), nn.GroupNorm(GROUPS, 64),
                                   nn.ReLU(inplace=True), nn.MaxPool2d(2))
        self.fc1 = nn.Sequential(nn.Linear(dim, 512), nn.ReLU(inplace=True))
        self.fc = nn.Linear(512, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.fc1(torch.flatten(self.conv2(self.conv1(x)), 1)))


def get_model(num_classes: int = 10) -> nn.Module:
    return FedAvgCNN(num_classes=num_classes)


class FLClient:
    """A client: plain local SGD on its own data, starting from the global model."""

    def __init__(self, client_id: int, train_data, device="cpu"):
        self.client_id = client_id
        self.train_data = train_data
        self.device = device
        self.model = None

    def set_model(self, global_state: dict) -> None:
        if self.model is None:
            self.model = get_model().to(self.device)
        self.model.load_state_dict(global_state)

    def local_train(self):
        config = get_fl_config()
        self.model.train()
        optimizer = torch.optim.SGD(self.model.parameters(), lr=config["lr"], momentum=config.get("momentum", 0.0),
                                    weight_decay=config.get("weight_decay", 0.0))
        criterion = nn.CrossEntropyLoss()
        X, y = self.train_data.tensors
        batch_size = int(config["batch_size"])
        for _ in range(int(config["local_epochs"])):
            order = torch.randperm(len(y))  # the global generator, seeded by train.py
            for start in range(0, len(y), batch_size):
                batch = order[start:start + batch_size]
                xb, yb = X[batch].to(self.device), y[batch].to(self.device)
                optimizer.zero_grad()
                criterion(self.model(xb), yb).backward()
                optimizer.step()
        return self.model.state_dict(), len(y)


class FLServer:
    """FedAvg's server: the global model is the average of the clients' models, weighted by data size."""

    def __init__(self, device="cpu"):
        self.device = device
        self.global_model = get_model().to(device)

    def get_global_state(self) -> dict:
        return self.global_model.state_dict()

    def aggregate(self, client_states: list, client_weights: list) -> None:
        total = float(sum(client_weights))
        averaged = {}
        for key, value in self.global_model.state_dict().items():
            averaged[key] = sum(state[key].float() * (w / total) for state, w in zip(client_states, client_weights))
            averaged[key] = averaged[key].to(value.dtype)
        self.global_model.load_state_dict(averaged)
