"""Batched image augmentations with their own random parameters per image (editable).

The representation-learning tasks' views are built from these: a random resized crop with a horizontal
flip, torchvision's colour jitter, random grayscale and a small Gaussian blur, each applied to a whole
batch (N, 3, H, W) of float images in [0, 1] at once and drawing every random number from the
``generator`` it is given, so that a run is reproducible. PIL transforms (torchvision's, lightly's
MoCoV2Transform) do the same per image at about 0.4 ms each, which these tasks' compute budgets cannot
afford. Every workspace starts from a copy of ``pytest_fmlbench.taskkit.batched_views`` as views.py.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

LUMA = torch.tensor([0.299, 0.587, 0.114]).view(1, 3, 1, 1)


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
