"""The backbone: DomainBed's MNIST_CNN for 8x8 images, its last feature map flattened rather than pooled.

DomainBed's MNIST_CNN: four 3x3 convolutions (the second with stride 2), each followed by ReLU and
GroupNorm(8), then global average pooling; the classifier is one linear layer. Here the inputs are
(2, 8, 8) instead of (2, 28, 28) and the widths are a quarter of DomainBed's by default (hparams 'width').
"""

from __future__ import annotations

import torch
import torch.nn as nn


class DigitsCNN(nn.Module):
    """DomainBed's MNIST_CNN at width w: channels w, 2w, 2w, 2w; 8x8 -> 4x4 -> pooled."""

    def __init__(self, input_shape: tuple[int, ...], width: int = 16):
        super().__init__()
        channels = [input_shape[0], width, 2 * width, 2 * width, 2 * width]
        strides = [1, 2, 1, 1]
        layers: list[nn.Module] = []
        for c_in, c_out, stride in zip(channels, channels[1:], strides):
            layers += [nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1), nn.ReLU(), nn.GroupNorm(8, c_out)]
        # flattened 4x4 maps instead of DomainBed's global average pooling: on 8x8 digits pooling throws
        # away where the strokes are, the shape that stays predictive; colour survives pooling intact
        self.body = nn.Sequential(*layers, nn.Flatten())
        self.n_outputs = channels[-1] * 4 * 4

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


def Featurizer(input_shape: tuple[int, ...], hparams: dict) -> nn.Module:
    """The feature extractor; its output size is in .n_outputs."""
    return DigitsCNN(input_shape, width=int(hparams.get("width", 16)))


def Classifier(in_features: int, out_features: int, hparams: dict) -> nn.Module:
    return nn.Linear(in_features, out_features)
