"""The augmentations of self-supervised pre-training (editable): MoCo v2's, applied per image.

train.py (protected) builds EvolvingTransform(input_size, config) once and calls it on every batch:
  transform(images, generator) -> list of views
images: float tensor (N, 3, H, W), pixels in [0, 1]; generator: the torch.Generator to draw all
randomness from (so a run is reproducible). Each view is a float tensor (N, 3, input_size,
input_size) that EvolvingModel.training_step receives in the same order. The evaluator feeds the
frozen backbone un-augmented images normalised with lightly's IMAGENET_NORMALIZE (encoder.normalise),
so views should be normalised the same way.

The augmentations are batched tensor operations with independent random parameters per image, from
views.py (editable too): the PIL transforms of lightly (lightly.transforms.MoCoV2Transform) work as
well, but cost about 0.4 ms per image, which this task's compute budget cannot afford.
"""

from __future__ import annotations

import torch

from encoder import normalise
from views import colour_jitter, random_grayscale, random_resized_crop

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
