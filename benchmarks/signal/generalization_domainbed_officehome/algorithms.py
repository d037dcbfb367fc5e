"""A hand-written better method for the signal table: ERM that cannot see colour, contrast or polarity.

The training domains show each digit as a shape of some colour on some background; Art paints it as a
soft, low-contrast stroke that is darker or lighter than its canvas. A network trained on raw RGB learns
cues (colour, contrast, dark-on-light) that do not hold on Art, and which ones it learns depends on the
seed. Three changes take those cues away, and a longer schedule trains the rest:
- the network sees each image in grey, standardised (its mean subtracted, divided by its standard
  deviation), so colour and contrast carry nothing (``input_norm``);
- half the training images are inverted (``invert_p``), so light-on-dark and dark-on-light are one class;
- half are blurred with a 3x3 binomial kernel (``blur_p``), so sharp edges are not needed;
- 900 steps (the knob range's top) with the learning rate decayed to zero along a cosine.
Chosen on validation (Art's validation part) only, seed 0: the baseline 0.419; grey-standardised 0.470;
+ inversion 0.565; + blur 0.561 at 300 steps and 0.694 at 900 steps with the cosine (0.698 in the task's
harness, as scripts/signal_table.py runs it).
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

import networks

GRAY = torch.tensor([0.299, 0.587, 0.114]).view(1, 3, 1, 1)
BINOMIAL = torch.tensor([0.25, 0.5, 0.25])


class Algorithm(nn.Module):
    """A subclass implements update() (one training step) and predict() (logits)."""

    def __init__(self, input_shape, num_classes: int, num_domains: int, hparams: dict):
        super().__init__()
        self.hparams = hparams

    def update(self, minibatches: list[tuple[torch.Tensor, torch.Tensor]], unlabeled=None) -> dict:
        raise NotImplementedError

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError


def grey_standardised(x: torch.Tensor) -> torch.Tensor:
    grey = (x * GRAY.to(x)).sum(dim=1, keepdim=True)
    mean, std = grey.mean(dim=(1, 2, 3), keepdim=True), grey.std(dim=(1, 2, 3), keepdim=True)
    return ((grey - mean) / (std + 1e-3)).expand(-1, 3, -1, -1)


def where_drawn(p: float, x: torch.Tensor, changed: torch.Tensor) -> torch.Tensor:
    """``changed`` for a random fraction ``p`` of the images, ``x`` for the others."""
    pick = (torch.rand(len(x), 1, 1, 1) < p).to(x)
    return changed * pick + x * (1 - pick)


class InvariantERM(Algorithm):
    """ERM on grey, standardised images, with polarity and blur augmentation and a cosine schedule."""

    def __init__(self, input_shape, num_classes: int, num_domains: int, hparams: dict):
        super().__init__(input_shape, num_classes, num_domains, hparams)
        self.featurizer = networks.Featurizer(input_shape, hparams)
        self.classifier = networks.Classifier(self.featurizer.n_outputs, num_classes, hparams)
        self.network = nn.Sequential(self.featurizer, self.classifier)
        self.optimizer = torch.optim.Adam(self.network.parameters(), lr=hparams["lr"],
                                          weight_decay=hparams["weight_decay"])
        self.schedule = torch.optim.lr_scheduler.CosineAnnealingLR(self.optimizer, T_max=int(hparams["steps"]))

    def update(self, minibatches, unlabeled=None) -> dict:
        x = torch.cat([x for x, _ in minibatches])
        y = torch.cat([y for _, y in minibatches])
        x = where_drawn(self.hparams["invert_p"], x, 1 - x)
        kernel = (BINOMIAL[:, None] * BINOMIAL[None]).to(x).expand(3, 1, 3, 3)
        x = where_drawn(self.hparams["blur_p"], x, F.conv2d(F.pad(x, (1, 1, 1, 1), mode="replicate"), kernel, groups=3))
        loss = F.cross_entropy(self.predict(x), y)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        self.schedule.step()
        return {"loss": loss.item()}

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return self.network(grey_standardised(x))


def build_algorithm(input_shape, num_classes: int, num_domains: int, hparams: dict) -> Algorithm:
    return InvariantERM(input_shape, num_classes, num_domains, hparams)
