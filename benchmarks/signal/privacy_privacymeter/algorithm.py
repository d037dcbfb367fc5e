"""A hand-written better method for the signal table: train so that members look like fresh images,
with noise augmentation and RelaxLoss, on a wider network of the baseline's family.

Membership inference, RMIA included, works because a network that fits its training set gives members a
much lower loss than fresh images. Here each image carries its own fixed pixel noise, which a network
memorises. Two known defences:
- augmentation (Kaya & Dumitras, "When Does Data Augmentation Help With Membership Inference Attacks?",
  ICML 2021): each time an image is seen it gets fresh Gaussian pixel noise of ``noise_sigma``, so its
  own noise is harder to memorise and the model generalises better;
- RelaxLoss (Chen, Yu & Fritz, ICLR 2022): training aims at a mean loss ``relax_alpha`` instead of zero:
  above it plain descent; below it, gradient ascent (odd epochs) or "posterior flattening" (even
  epochs: correctly classified examples keep p(true class) and share the rest evenly over the other
  classes), so members end with a non-member-like loss; ``relax_alpha`` 0 turns it off.
Width 32 (from 16), weight decay 5e-4 and a cosine learning-rate decay buy back the accuracy RelaxLoss
costs. Settings chosen on the data in data/ alone (train on 250, hold out 100, two splits; held-out
accuracy / a loss-threshold attack's AUC: the baseline recipe 0.63 / 0.69, these 0.73 / 0.60), then
checked on the val audit (AUC_gap 0.180 against the baseline's 0.319, accuracy 0.70). Random 1-pixel
shifts and an ensemble of 3 were tried and dropped (shifts cost a fifth of the accuracy on 8x8 images;
the ensemble bought nothing).
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

ARCHITECTURE_KEYS = ("width", "blocks", "norm", "activation", "hidden", "dropout", "ensemble")


def get_architecture(config: dict) -> dict:
    return {key: config[key] for key in ARCHITECTURE_KEYS if key in config}


def add_noise(x: torch.Tensor, sigma: float, generator: torch.Generator) -> torch.Tensor:
    """Fresh Gaussian pixel noise, drawn anew each time an image is seen."""
    return x + sigma * torch.randn(x.shape, generator=generator).to(x.device)


def flattened_targets(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Soft targets: correctly classified rows keep p(true class) and share the rest evenly; others one-hot."""
    probs = F.softmax(logits, dim=1).detach()
    classes = logits.shape[1]
    true_prob = probs.gather(1, y[:, None])
    flat = ((1 - true_prob) / (classes - 1)).expand(-1, classes).clone()
    flat.scatter_(1, y[:, None], true_prob)
    correct = (probs.argmax(dim=1) == y)[:, None]
    return torch.where(correct, flat, F.one_hot(y, classes).float())


def train_member(member: nn.Module, X: torch.Tensor, y: torch.Tensor, config: dict, seed: int) -> None:
    optimizer = torch.optim.SGD(member.parameters(), lr=float(config["lr"]), momentum=float(config["momentum"]),
                                weight_decay=float(config["weight_decay"]))
    epochs, batch_size = int(config["epochs"]), int(config["batch_size"])
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=epochs * -(-len(X) // batch_size))
    alpha = float(config["relax_alpha"])
    generator = torch.Generator().manual_seed(seed)
    member.train()
    for epoch in range(epochs):
        order = torch.randperm(len(X), generator=generator).to(X.device)
        for start in range(0, len(X), batch_size):
            batch = order[start:start + batch_size]
            logits = member(add_noise(X[batch], float(config["noise_sigma"]), generator))
            loss = F.cross_entropy(logits, y[batch])
            if not alpha or loss.item() > alpha:
                objective = loss
            elif epoch % 2 == 1:
                objective = -loss
            else:
                objective = -(flattened_targets(logits, y[batch]) * F.log_softmax(logits, dim=1)).sum(dim=1).mean()
            optimizer.zero_grad()
            objective.backward()
            optimizer.step()
            schedule.step()


def train(model: nn.Module, X: torch.Tensor, y: torch.Tensor, config: dict) -> nn.Module:
    for index, member in enumerate(model.members):
        train_member(member, X, y, config, int(config["seed"]) + index)
    return model
