"""The method: how the audited model is built and trained (the original's target files are privacy
meter's trainers/default_trainer.py and models/wide_resnet.py).

train.py (protected) calls

    get_architecture(config) -> dict
        the network, as a spec of architecture.py's family (architecture.ArchitectureSpec: width,
        blocks, norm, activation, hidden, dropout, ensemble); train.py builds it with
        architecture.build and the auditor rebuilds the same network to load your weights;
    train(model, X, y, config) -> torch.nn.Module
        trains that network on the training set and returns it (the same object, or one of the
        same architecture.Network class and spec). X: float32 tensor (n, 1, 8, 8) in [0, 1], y: int64
        tensor (n,), both on the device the model is on; config: the dict in config.json.

The baseline trains like the original's default trainer: plain SGD with momentum, no weight decay, no
augmentation, until the network fits its training set, which is what makes it leak membership. Anything
may change here: the loss, the optimiser and its schedule, regularisation, augmentation, noise,
distillation, ensembling over disjoint subsets (ensemble > 1), how many of the given examples are used,
DP-SGD (opacus is installed; use norm "group" or "none" with it), as long as the returned weights fit
the declared architecture.
"""

from __future__ import annotations

import torch
import torch.nn as nn

ARCHITECTURE_KEYS = ("width", "blocks", "norm", "activation", "hidden", "dropout", "ensemble")


def get_architecture(config: dict) -> dict:
    return {key: config[key] for key in ARCHITECTURE_KEYS if key in config}


def train(model: nn.Module, X: torch.Tensor, y: torch.Tensor, config: dict) -> nn.Module:
    optimizer = torch.optim.SGD(model.parameters(), lr=float(config["lr"]), momentum=float(config["momentum"]),
                                weight_decay=float(config["weight_decay"]))
    criterion = nn.CrossEntropyLoss()
    generator = torch.Generator().manual_seed(int(config["seed"]))
    batch_size = int(config["batch_size"])
    model.train()
    for _ in range(int(config["epochs"])):
        order = torch.randperm(len(X), generator=generator).to(X.device)
        for start in range(0, len(X), batch_size):
            batch = order[start:start + batch_size]
            optimizer.zero_grad()
            criterion(model(X[batch]), y[batch]).backward()
            optimizer.step()
    return model
