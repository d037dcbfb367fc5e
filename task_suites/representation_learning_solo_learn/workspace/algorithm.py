"""The self-supervised method (editable): Barlow Twins, with lightly's loss and projection head.

train.py (protected) builds the backbone (encoder.Backbone, chosen in backbone.json) and calls
  config = get_training_config()                       the dict in config.json (plus your defaults)
  model = get_model(backbone, config)                  .backbone must be that same object;
                                                       model(x) -> (features, projections)
  augment = get_augmentation(input_size, config)       augment(images, generator) -> one view
  criterion = get_loss(config)                         criterion(z1, z2) -> scalar loss
  optimizer, scheduler = get_optimizer(model, config, total_steps)
and then, for every batch of its fixed budget (EPOCHS x batches of BATCH_SIZE images):
  x1, x2 = augment(batch, generator), augment(batch, generator)
  loss = criterion(model(x1)[1], model(x2)[1]); loss.backward(); optimizer.step(); scheduler.step()
It saves the weights of `backbone`, which the evaluator probes: train it in place; do not replace it
or change its layers. Images arrive as floats (N, 3, 16, 16) in [0, 1]; the evaluator feeds the
backbone un-augmented images normalised with encoder.normalise (ImageNet mean/std).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F
from lightly.loss import BarlowTwinsLoss
from lightly.models.modules.heads import BarlowTwinsProjectionHead
from lightly.utils.lars import LARS
from lightly.utils.scheduler import CosineWarmupScheduler

from encoder import normalise

CONFIG_PATH = Path(__file__).resolve().parent / "config.json"
LUMA = torch.tensor([0.299, 0.587, 0.114]).view(1, 3, 1, 1)


class BarlowTwinsModel(nn.Module):
    """The backbone and Barlow Twins' 3-layer projector (BN + ReLU after the first two layers).

    solo-learn's CIFAR projector is 2048-2048 wide, 8x its batch of 256; here 512, 8x the batch of 64:
    a narrower one (256) makes the cross-correlation's outcome depend much more on the seed.
    """

    def __init__(self, backbone: nn.Module, hidden_dim: int, output_dim: int):
        super().__init__()
        self.backbone = backbone
        self.projector = BarlowTwinsProjectionHead(backbone.feature_dim, hidden_dim, output_dim)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        features = self.backbone(x)
        return features, self.projector(features)


def get_training_config() -> dict:
    return json.loads(CONFIG_PATH.read_text())


def get_model(backbone: nn.Module, config: dict) -> nn.Module:
    return BarlowTwinsModel(backbone, config["proj_hidden_dim"], config["proj_output_dim"])


class ScaledBarlowTwinsLoss(nn.Module):
    """lightly's BarlowTwinsLoss times solo-learn's ``scale_loss`` (0.1 in its CIFAR recipe). Under LARS the
    scale does not set the step size; it shifts the balance between gradient and weight decay."""

    def __init__(self, lambda_param: float, scale: float):
        super().__init__()
        self.loss = BarlowTwinsLoss(lambda_param=lambda_param)
        self.scale = scale

    def forward(self, z1: torch.Tensor, z2: torch.Tensor) -> torch.Tensor:
        return self.scale * self.loss(z1, z2)


def get_loss(config: dict) -> nn.Module:
    """Cross-correlation of the two views' batch-standardised projections, pulled to the identity."""
    return ScaledBarlowTwinsLoss(config["lambda_param"], config.get("scale_loss", 1.0))


def get_optimizer(model: nn.Module, config: dict, total_steps: int):
    """solo-learn's LARS (or SGD / Adam) with a linear warm-up then cosine decay, stepped once per batch.

    As solo-learn's exclude_bias_n_norm, biases and batch-norm parameters get neither weight decay nor
    the layer-wise trust ratio (lightly's LARS skips the ratio for groups without weight decay).
    """
    name = config.get("optimizer", "lars")
    weights = [p for p in model.parameters() if p.ndim > 1]
    others = [p for p in model.parameters() if p.ndim <= 1]
    groups = [{"params": weights}, {"params": others, "weight_decay": 0.0}]
    if name == "lars":
        optimizer = LARS(groups, lr=config["lr"], momentum=0.9, weight_decay=config["weight_decay"],
                         trust_coefficient=config.get("eta", 0.02))
    elif name == "sgd":
        optimizer = torch.optim.SGD(groups, lr=config["lr"], momentum=0.9, weight_decay=config["weight_decay"])
    elif name == "adam":
        optimizer = torch.optim.Adam(groups, lr=config["lr"], weight_decay=config["weight_decay"])
    else:
        raise ValueError(f"unknown optimizer {name!r} (expected 'lars', 'sgd' or 'adam')")
    warmup_steps = int(config.get("warmup_frac", 0.1) * total_steps)
    return optimizer, CosineWarmupScheduler(optimizer, warmup_steps, total_steps, end_value=0.0)


# --- augmentations: the original's torchvision pipeline, batched with independent draws per image ---

def uniform(n: int, low: float, high: float, generator: torch.Generator) -> torch.Tensor:
    return low + (high - low) * torch.rand(n, generator=generator)


def grey(images: torch.Tensor) -> torch.Tensor:
    return (images * LUMA).sum(dim=1, keepdim=True)


def random_resized_crop(images: torch.Tensor, size: int, scale: tuple[float, float], ratio: tuple[float, float],
                        hflip_prob: float, generator: torch.Generator) -> torch.Tensor:
    """A crop of random area and aspect ratio per image, resized to ``size`` (bilinear), maybe mirrored."""
    n = images.shape[0]
    area = uniform(n, *scale, generator)
    aspect = torch.exp(uniform(n, math.log(ratio[0]), math.log(ratio[1]), generator))
    w = torch.sqrt(area * aspect).clamp(max=1.0)  # crop sides as fractions of the image side
    h = torch.sqrt(area / aspect).clamp(max=1.0)
    cx = (2 * torch.rand(n, generator=generator) - 1) * (1 - w)
    cy = (2 * torch.rand(n, generator=generator) - 1) * (1 - h)
    flip = torch.where(torch.rand(n, generator=generator) < hflip_prob, -1.0, 1.0)
    theta = torch.zeros(n, 2, 3)
    theta[:, 0, 0], theta[:, 0, 2], theta[:, 1, 1], theta[:, 1, 2] = w * flip, cx, h, cy
    grid = F.affine_grid(theta, [n, images.shape[1], size, size], align_corners=False)
    return F.grid_sample(images, grid, mode="bilinear", padding_mode="reflection", align_corners=False)


def colour_jitter(images: torch.Tensor, brightness: float, contrast: float, saturation: float, hue: float,
                  prob: float, generator: torch.Generator) -> torch.Tensor:
    """torchvision's ColorJitter factors, drawn per image and applied with probability ``prob``."""
    n = images.shape[0]

    def factor(strength: float) -> torch.Tensor:
        return uniform(n, max(0.0, 1 - strength), 1 + strength, generator).view(n, 1, 1, 1)

    out = images * factor(brightness)
    mean = grey(out).mean(dim=(2, 3), keepdim=True)
    out = (out - mean) * factor(contrast) + mean
    luminance = grey(out)
    out = (out - luminance) * factor(saturation) + luminance
    # hue: rotate colours about the grey axis by up to hue * 360 degrees (Rodrigues' formula)
    angle = uniform(n, -hue, hue, generator) * 2 * math.pi
    axis = torch.full((3,), 1 / math.sqrt(3))
    cross = torch.tensor([[0.0, -axis[2], axis[1]], [axis[2], 0.0, -axis[0]], [-axis[1], axis[0], 0.0]])
    cos, sin = torch.cos(angle).view(n, 1, 1), torch.sin(angle).view(n, 1, 1)
    rotation = cos * torch.eye(3) + sin * cross + (1 - cos) * torch.outer(axis, axis)
    out = torch.einsum("nij,njhw->nihw", rotation, out).clamp(0, 1)
    applied = (torch.rand(n, generator=generator) < prob).view(n, 1, 1, 1)
    return torch.where(applied, out, images)


def random_grayscale(images: torch.Tensor, prob: float, generator: torch.Generator) -> torch.Tensor:
    applied = (torch.rand(images.shape[0], generator=generator) < prob).view(-1, 1, 1, 1)
    return torch.where(applied, grey(images).expand_as(images), images)


def gaussian_blur(images: torch.Tensor, sigma: tuple[float, float], prob: float,
                  generator: torch.Generator) -> torch.Tensor:
    """A 3x3 Gaussian blur with a random sigma per image, applied with probability ``prob``."""
    n, c = images.shape[:2]
    s = uniform(n, *sigma, generator).view(n, 1)
    taps = torch.exp(-torch.tensor([-1.0, 0.0, 1.0]).view(1, 3) ** 2 / (2 * s * s))
    taps = taps / taps.sum(dim=1, keepdim=True)
    kernels = (taps[:, :, None] * taps[:, None, :]).repeat_interleave(c, dim=0).unsqueeze(1)
    padded = F.pad(images, (1, 1, 1, 1), mode="reflect").reshape(1, n * c, images.shape[2] + 2, images.shape[3] + 2)
    blurred = F.conv2d(padded, kernels, groups=n * c).view_as(images)
    applied = (torch.rand(n, generator=generator) < prob).view(n, 1, 1, 1)
    return torch.where(applied, blurred, images)


class Augmentation:
    """solo-learn's CIFAR view: RandomResizedCrop(scale=(min_scale, 1)), horizontal flip, colour jitter
    (0.4, 0.4, 0.2, 0.1) with p = 0.8, grayscale with p = 0.2, no blur by default (a 3x3 Gaussian blur
    with p = blur_prob). min_scale is 0.5 rather than 0.08: a crop of 8% of a 16x16 image is a
    4x4-pixel patch, which no longer shows the object's shape."""

    def __init__(self, input_size: int, config: dict):
        self.input_size = input_size
        self.min_scale = config.get("min_scale", 0.5)
        strength = config.get("cj_strength", 1.0)
        self.jitter = (0.4 * strength, 0.4 * strength, 0.2 * strength, 0.1 * strength)
        self.blur_prob = config.get("blur_prob", 0.0)

    def __call__(self, images: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        out = random_resized_crop(images, self.input_size, (self.min_scale, 1.0), (3 / 4, 4 / 3), 0.5, generator)
        out = colour_jitter(out, *self.jitter, 0.8, generator)
        out = random_grayscale(out, 0.2, generator)
        out = gaussian_blur(out, (0.1, 2.0), self.blur_prob, generator)
        return normalise(out)


def get_augmentation(input_size: int, config: dict) -> Augmentation:
    return Augmentation(input_size, config)
