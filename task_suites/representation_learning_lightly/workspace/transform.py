"""The augmentations of self-supervised pre-training (editable): MoCo v2's, applied per image.

train.py (protected) builds EvolvingTransform(input_size, config) once and calls it on every batch:
  transform(images, generator) -> list of views
images: float tensor (N, 3, H, W), pixels in [0, 1]; generator: the torch.Generator to draw all
randomness from (so a run is reproducible). Each view is a float tensor (N, 3, input_size,
input_size) that EvolvingModel.training_step receives in the same order. The evaluator feeds the
frozen backbone un-augmented images normalised with lightly's IMAGENET_NORMALIZE (encoder.normalise),
so views should be normalised the same way.

The augmentations are batched tensor operations with independent random parameters per image: the
PIL transforms of lightly (lightly.transforms.MoCoV2Transform) work too, but cost about 0.4 ms per
image, which this task's compute budget cannot afford.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from encoder import normalise

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


class ViewTransform:
    """One random view: MoCo v2's crop, flip, colour jitter and grayscale (no blur on tiny images,
    as the original task sets gaussian_blur=0 for CIFAR)."""

    def __init__(self, input_size: int, min_scale: float = 0.2, cj_prob: float = 0.8, cj_strength: float = 1.0,
                 cj_bright: float = 0.4, cj_contrast: float = 0.4, cj_sat: float = 0.4, cj_hue: float = 0.1,
                 random_gray_scale: float = 0.2, hf_prob: float = 0.5):
        self.input_size = input_size
        self.min_scale = min_scale
        self.cj_prob = cj_prob
        self.jitter = tuple(cj_strength * s for s in (cj_bright, cj_contrast, cj_sat, cj_hue))
        self.random_gray_scale = random_gray_scale
        self.hf_prob = hf_prob

    def __call__(self, images: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        out = random_resized_crop(images, self.input_size, (self.min_scale, 1.0), (3 / 4, 4 / 3), self.hf_prob,
                                  generator)
        out = colour_jitter(out, *self.jitter, self.cj_prob, generator)
        out = random_grayscale(out, self.random_gray_scale, generator)
        return normalise(out)


class EvolvingTransform:
    """Two views of every image, both from the same MoCo v2 view transform."""

    def __init__(self, input_size: int, config: dict):
        view = ViewTransform(input_size, min_scale=config.get("min_scale", 0.2),
                             cj_strength=config.get("cj_strength", 1.0))
        self.views = [view, view]

    def __call__(self, images: torch.Tensor, generator: torch.Generator) -> list[torch.Tensor]:
        return [view(images, generator) for view in self.views]
