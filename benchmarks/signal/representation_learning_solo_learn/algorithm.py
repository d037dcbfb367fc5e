"""A stronger method than the baseline's Barlow Twins, written by hand for the signal table
(scripts/signal_table.py): SimCLR's contrastive loss (lightly's NT-Xent, temperature 0.3) on the same
projector and LARS schedule, and views whose colours are distorted over the whole hue circle. The class
is the object's shape, and colour is the nuisance two views of one image share most (object, background
and distractor colours): with the baseline's hue jitter of 0.1 a method can match views by colour. Tuned
on validation only (one seed each, val accuracy; the baseline's is 0.13): Barlow Twins with these views
0.20; NT-Xent with them and AdamW at lr 0.002 0.25; NT-Xent with them and the baseline's LARS 0.40.
The rest is the baseline's file.

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
from pathlib import Path

import torch
import torch.nn as nn
from lightly.loss import BarlowTwinsLoss, NTXentLoss
from lightly.models.modules.heads import BarlowTwinsProjectionHead
from lightly.utils.lars import LARS
from lightly.utils.scheduler import CosineWarmupScheduler

from encoder import normalise
from views import colour_jitter, gaussian_blur, random_grayscale, random_resized_crop

CONFIG_PATH = Path(__file__).resolve().parent / "config.json"


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
    """NT-Xent: each view's projection is pulled to its pair's and pushed from the batch's other images."""
    return NTXentLoss(temperature=config.get("temperature", 0.3))


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


# --- augmentations: the original's torchvision pipeline, batched (views.py) ---

class Augmentation:
    """solo-learn's CIFAR view: RandomResizedCrop(scale=(min_scale, 1)), horizontal flip, colour jitter
    (0.4, 0.4, 0.2, 0.1) with p = 0.8, grayscale with p = 0.2, no blur by default (a 3x3 Gaussian blur
    with p = blur_prob). min_scale is 0.5 rather than 0.08: a crop of 8% of a 16x16 image is a
    4x4-pixel patch, which no longer shows the object's shape."""

    def __init__(self, input_size: int, config: dict):
        self.input_size = input_size
        self.min_scale = config.get("min_scale", 0.5)
        strength = config.get("cj_strength", 1.0)
        # hue as its own setting: up to 0.5 turns a colour anywhere on the circle
        self.jitter = (0.4 * strength, 0.4 * strength, 0.2 * strength, config.get("hue", 0.1 * strength))
        self.grayscale_prob = config.get("grayscale_prob", 0.2)
        self.blur_prob = config.get("blur_prob", 0.0)

    def __call__(self, images: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        out = random_resized_crop(images, self.input_size, (self.min_scale, 1.0), (3 / 4, 4 / 3), 0.5, generator)
        out = colour_jitter(out, *self.jitter, 0.8, generator)
        out = random_grayscale(out, self.grayscale_prob, generator)
        out = gaussian_blur(out, (0.1, 2.0), self.blur_prob, generator)
        return normalise(out)


def get_augmentation(input_size: int, config: dict) -> Augmentation:
    return Augmentation(input_size, config)
