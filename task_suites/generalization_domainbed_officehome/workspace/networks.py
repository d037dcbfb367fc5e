"""The backbone (editable), after DomainBed's networks.py.

DomainBed uses an ImageNet-pretrained ResNet-50 for OfficeHome; no pretrained weights can be loaded
offline and the images here are (3, 16, 16), so the featurizer is a small CNN trained from scratch in
the style of DomainBed's MNIST_CNN: 3x3 convolutions, each followed by ReLU and GroupNorm(8), two of
them with stride 2, then global average pooling. The classifier is one linear layer.
"""

from __future__ import annotations

import torch
import torch.nn as nn


class SmallCNN(nn.Module):
    """Channels w, 2w, 2w, 4w; 16x16 -> 8x8 -> 4x4 -> pooled."""

    def __init__(self, input_shape: tuple[int, ...], width: int = 16):
        super().__init__()
        channels = [input_shape[0], width, 2 * width, 2 * width, 4 * width]
        strides = [1, 2, 1, 2]
        layers: list[nn.Module] = []
        for c_in, c_out, stride in zip(channels, channels[1:], strides):
            layers += [nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1), nn.ReLU(), nn.GroupNorm(8, c_out)]
        self.body = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.n_outputs = channels[-1]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


def Featurizer(input_shape: tuple[int, ...], hparams: dict) -> nn.Module:
    """The feature extractor; its output size is in .n_outputs."""
    return SmallCNN(input_shape, width=int(hparams.get("width", 16)))


def Classifier(in_features: int, out_features: int, hparams: dict) -> nn.Module:
    return nn.Linear(in_features, out_features)
