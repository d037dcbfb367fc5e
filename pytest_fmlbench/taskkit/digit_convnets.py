"""The family of networks privacy_privacymeter trains and its auditor loads: small convolutional networks
on 8x8 digit images (protected; every workspace of the task receives a copy of
``pytest_fmlbench.taskkit.digit_convnets`` as architecture.py).

The experiment writes a state dict and the architecture spec it trained; the evaluator rebuilds the
network from the spec with this module and loads the weights strictly, so no code from the
experiment ever runs in the evaluator. The spec is validated with hard bounds that keep a model small
enough to audit in a few seconds.
"""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn as nn
from pydantic import BaseModel, ConfigDict, Field

IMAGE_SIZE = 8
NUM_CLASSES = 10


class ArchitectureSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    width: int = Field(32, ge=4, le=64, description="channels of the first conv block (doubled per block)")
    blocks: int = Field(2, ge=1, le=3, description="conv blocks: conv 3x3, norm, activation, 2x2 max-pool")
    norm: Literal["none", "batch", "group", "layer"] = "none"
    activation: Literal["relu", "elu", "gelu", "tanh"] = "relu"
    hidden: int = Field(128, ge=0, le=512, description="units of the hidden layer of the head (0: linear head)")
    dropout: float = Field(0.0, ge=0.0, le=0.9, description="dropout before the last layer (training only)")
    ensemble: int = Field(1, ge=1, le=8, description="independent copies whose softmax outputs are averaged")


def _norm(kind: str, channels: int, spatial: int) -> nn.Module:
    if kind == "batch":
        return nn.BatchNorm2d(channels)
    if kind == "group":
        return nn.GroupNorm(min(4, channels), channels)
    if kind == "layer":
        return nn.LayerNorm([channels, spatial, spatial])
    return nn.Identity()


def _activation(kind: str) -> nn.Module:
    return {"relu": nn.ReLU, "elu": nn.ELU, "gelu": nn.GELU, "tanh": nn.Tanh}[kind]()


class SmallCNN(nn.Module):
    def __init__(self, spec: ArchitectureSpec):
        super().__init__()
        layers, channels, spatial = [], 1, IMAGE_SIZE
        for block in range(spec.blocks):
            out = spec.width * 2**block
            layers += [nn.Conv2d(channels, out, kernel_size=3, padding=1), _norm(spec.norm, out, spatial),
                       _activation(spec.activation), nn.MaxPool2d(2)]
            channels, spatial = out, spatial // 2
        self.features = nn.Sequential(*layers)
        flat = channels * spatial * spatial
        head: list[nn.Module] = [nn.Flatten()]
        if spec.hidden:
            head += [nn.Linear(flat, spec.hidden), _activation(spec.activation)]
            flat = spec.hidden
        head += [nn.Dropout(spec.dropout), nn.Linear(flat, NUM_CLASSES)]
        self.head = nn.Sequential(*head)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


class Network(nn.Module):
    """``ensemble`` SmallCNNs; the output is the log of their mean softmax (usable as logits)."""

    def __init__(self, spec: ArchitectureSpec):
        super().__init__()
        self.spec = spec
        self.members = nn.ModuleList(SmallCNN(spec) for _ in range(spec.ensemble))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if len(self.members) == 1:
            return self.members[0](x)
        probs = torch.stack([torch.softmax(m(x), dim=1) for m in self.members]).mean(0)
        return torch.log(probs.clamp_min(1e-12))


def build(spec: ArchitectureSpec | dict) -> Network:
    return Network(spec if isinstance(spec, ArchitectureSpec) else ArchitectureSpec.model_validate(spec))
