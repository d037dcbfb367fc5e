"""A fully connected classifier that learns continually (the stand-in's, without convolutional layers)."""

import torch
from torch import nn
from torch.nn import functional as F

from models.cl.continual_learner import ContinualLearner
from models.cl.memory_buffer import MemoryBuffer


class Classifier(ContinualLearner, MemoryBuffer):
    def __init__(self, image_size, image_channels, classes, fc_layers=3, fc_units=400):
        super().__init__()
        self.classes = classes
        self.label = "Classifier"
        self.binaryCE = self.binaryCE_distill = False
        sizes = [image_channels * image_size ** 2] + [fc_units] * (fc_layers - 1)
        self.fcE = nn.Sequential(*[layer for a, b in zip(sizes, sizes[1:]) for layer in (nn.Linear(a, b), nn.ReLU())])
        self.fcE.layers = fc_layers - 1
        self.classifier = nn.Linear(sizes[-1], classes)

    def forward(self, x):
        return self.classifier(self.fcE(x.flatten(1)))

    def classify(self, x, allowed_classes=None, no_prototypes=False):
        scores = self(x)
        return scores if allowed_classes is None else scores[:, allowed_classes]

    def train_a_batch(self, x, y, active_classes=None, context=1, **kwargs):
        self.train()
        self.optimizer.zero_grad()
        scores = self(x) if active_classes is None else self(x)[:, active_classes]
        prediction_loss = F.cross_entropy(scores, y)
        penalty = self.surrogate_loss() if self.weight_penalty and context > 1 else torch.zeros((), device=x.device)
        loss_total = prediction_loss + self.reg_strength * penalty
        loss_total.backward()
        self.optimizer.step()
        accuracy = (scores.argmax(1) == y).float().mean().item()
        return {"loss_total": loss_total.item(), "pred": prediction_loss.item(), "param_reg": penalty.item(),
                "accuracy": accuracy}
