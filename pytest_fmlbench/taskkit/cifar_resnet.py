"""The backbone family whose weights the agent's pre-training learns (protected).

The evaluator builds the backbone itself from this module (``pytest_fmlbench.taskkit.cifar_resnet``;
every workspace receives a copy of it as ``encoder.py``, for the experiment), loads the agent's weights
into it and extracts the features it probes: no code the agent wrote runs while it scores. The family
is the CIFAR-style ResNet of lightly's ``ResNetGenerator`` (a 3x3 stem without max-pool; stages at
strides 1, 2, 2, 2; width multiplier), written here in plain torch so the evaluator does not import
lightly and torchvision. ``backbone.json`` picks the member. The original task allows refining the
backbone "as long as parameter count and FLOPs remain comparable" to the baseline's: the evaluator
enforces BUDGET_FACTOR on both.
"""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn as nn
import torch.nn.functional as F
from pydantic import BaseModel, ConfigDict, Field, model_validator

INPUT_SIZE = 16  # images are 16x16 RGB
# lightly.transforms.utils.IMAGENET_NORMALIZE, the normalisation of the original's probe images
MEAN = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
STD = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)
BUDGET_FACTOR = 1.10  # parameters and multiply-accumulates may exceed the baseline's by at most 10%
DEPTHS = {"resnet-9": (1, 1, 1, 1), "resnet-18": (2, 2, 2, 2), "resnet-34": (3, 4, 6, 3)}


class BackboneSpec(BaseModel):
    """``backbone.json``: which member of the family; read as data, never executed."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: Literal["resnet-9", "resnet-18", "resnet-34"]
    width: float = Field(gt=0, le=2.0, description="channel multiplier: the stem has int(64 * width) channels")
    num_splits: int = Field(0, ge=0, le=16, description="batch-norm groups during training (0 or 1: plain)")

    @model_validator(mode="after")
    def _enough_channels(self) -> BackboneSpec:
        if int(64 * self.width) < 4:
            raise ValueError("width gives fewer than 4 channels")
        return self


# the baseline tasks' backbone, the budget's reference (its batch-norm groups change neither count)
BASELINE_SPEC = BackboneSpec(name="resnet-9", width=0.125)


class SplitBatchNorm2d(nn.BatchNorm2d):
    """BatchNorm whose training statistics come from ``num_splits`` interleaved groups of the batch.

    It simulates the per-GPU statistics of multi-GPU training, which MoCo's shuffled BN relies on
    (lightly's SplitBatchNorm does the same). Running statistics are the groups' average, so the
    state dict is that of a plain BatchNorm2d and evaluation is plain batch norm.
    """

    def __init__(self, num_features: int, num_splits: int):
        super().__init__(num_features)
        self.num_splits = num_splits

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.num_splits <= 1:
            return super().forward(x)
        n, c, h, w = x.shape
        s = self.num_splits
        if n % s:
            raise ValueError(f"batch size {n} is not divisible by num_splits={s}")
        # one fused batch norm over (n / s, c * s) channels: sample i lands in channel block i % s
        running_mean, running_var = self.running_mean.repeat(s), self.running_var.repeat(s)
        out = F.batch_norm(x.reshape(n // s, c * s, h, w), running_mean, running_var, self.weight.repeat(s),
                           self.bias.repeat(s), True, self.momentum, self.eps)
        with torch.no_grad():
            self.running_mean.copy_(running_mean.view(s, c).mean(dim=0))
            self.running_var.copy_(running_var.view(s, c).mean(dim=0))
            self.num_batches_tracked += 1
        return out.view(n, c, h, w)


class BasicBlock(nn.Module):
    def __init__(self, in_channels: int, channels: int, stride: int, num_splits: int):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, channels, 3, stride=stride, padding=1, bias=False)
        self.bn1 = SplitBatchNorm2d(channels, num_splits)
        self.conv2 = nn.Conv2d(channels, channels, 3, stride=1, padding=1, bias=False)
        self.bn2 = SplitBatchNorm2d(channels, num_splits)
        self.shortcut = nn.Sequential()
        if stride != 1 or in_channels != channels:
            self.shortcut = nn.Sequential(nn.Conv2d(in_channels, channels, 1, stride=stride, bias=False),
                                          SplitBatchNorm2d(channels, num_splits))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(out)) + self.shortcut(x))


class Backbone(nn.Module):
    """Images (N, 3, 16, 16), normalised -> features (N, feature_dim): global average of the last stage."""

    def __init__(self, spec: BackboneSpec):
        super().__init__()
        base = int(64 * spec.width)
        self.conv1 = nn.Conv2d(3, base, 3, stride=1, padding=1, bias=False)
        self.bn1 = SplitBatchNorm2d(base, spec.num_splits)
        stages, in_channels = [], base
        for index, depth in enumerate(DEPTHS[spec.name]):
            channels = base * 2 ** index
            blocks = []
            for block in range(depth):
                stride = 2 if index > 0 and block == 0 else 1
                blocks.append(BasicBlock(in_channels, channels, stride, spec.num_splits))
                in_channels = channels
            stages.append(nn.Sequential(*blocks))
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.feature_dim: int = in_channels

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.layer4(self.layer3(self.layer2(self.layer1(out))))
        return F.adaptive_avg_pool2d(out, 1).flatten(1)


def build(spec: BackboneSpec) -> Backbone:
    return Backbone(spec)


def normalise(images: torch.Tensor) -> torch.Tensor:
    """Pixels in [0, 1], shape (N, 3, H, W) -> the normalised input the backbone is probed with."""
    return (images - MEAN.to(images.device)) / STD.to(images.device)


def _conv_macs(layer: nn.Conv2d, size: int) -> tuple[int, int]:
    out = (size + 2 * layer.padding[0] - layer.kernel_size[0]) // layer.stride[0] + 1
    per_pixel = layer.in_channels * layer.out_channels * layer.kernel_size[0] * layer.kernel_size[1]
    return per_pixel * out * out, out


def cost(spec: BackboneSpec) -> tuple[int, int]:
    """(parameters, multiply-accumulates of the convolutions for one 16x16 image)."""
    model = build(spec)
    macs, size = _conv_macs(model.conv1, INPUT_SIZE)
    for stage in (model.layer1, model.layer2, model.layer3, model.layer4):
        for block in stage:
            first, out_size = _conv_macs(block.conv1, size)
            second, _ = _conv_macs(block.conv2, out_size)
            macs += first + second
            if len(block.shortcut):
                macs += _conv_macs(block.shortcut[0], size)[0]
            size = out_size
    return sum(p.numel() for p in model.parameters()), macs


def budget() -> tuple[int, int]:
    """The most parameters and multiply-accumulates a backbone may have."""
    params, macs = cost(BASELINE_SPEC)
    return int(params * BUDGET_FACTOR), int(macs * BUDGET_FACTOR)
