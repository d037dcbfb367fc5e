"""The auditor's reference models: the baseline's training recipe, owned by the harness.

RMIA needs models trained like the target on data that does or does not contain each audited point.
The auditor trains them itself with the task's baseline recipe (the architecture and training procedure
that the unmodified workspace uses), never with code from the experiment: reference models produced by
the audited party could be made to look exactly like the target and hide any leak.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn as nn

from pytest_fmlbench.taskkit.digit_convnets import ArchitectureSpec, build

SPEC = ArchitectureSpec(width=16, blocks=2, norm="none", activation="relu", hidden=64, dropout=0.0, ensemble=1)
LR, MOMENTUM, WEIGHT_DECAY, EPOCHS, BATCH_SIZE = 0.05, 0.9, 0.0, 40, 32


def train_reference(X: np.ndarray, y: np.ndarray, seed: int) -> nn.Module:
    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    model = build(SPEC)
    params = list(model.parameters())
    velocity = [torch.zeros_like(p) for p in params]
    criterion = nn.CrossEntropyLoss()
    xs, ys = torch.from_numpy(X), torch.from_numpy(y)
    model.train()
    for _ in range(EPOCHS):
        order = torch.randperm(len(xs), generator=generator)
        for start in range(0, len(xs), BATCH_SIZE):
            batch = order[start:start + BATCH_SIZE]
            grads = torch.autograd.grad(criterion(model(xs[batch]), ys[batch]), params)
            with torch.no_grad():
                for p, g, v in zip(params, grads, velocity):
                    # torch.optim.SGD's update, written out: torch.optim's first use imports
                    # torch._dynamo, a second of start-up paid by every harness process
                    v.mul_(MOMENTUM).add_(g + WEIGHT_DECAY * p)
                    p.add_(v, alpha=-LR)
    return model.eval()


def true_label_probs(model: nn.Module, X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Softmax probability of the true label (privacy meter's signal), in float64."""
    with torch.no_grad():
        probs = torch.softmax(model(torch.from_numpy(X)).double(), dim=1)
    return probs[torch.arange(len(y)), torch.from_numpy(y)].numpy()
