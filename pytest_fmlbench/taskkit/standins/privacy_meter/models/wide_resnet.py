"""The stand-in's network: privacy meter's WideResNet(nin, nclass, depth, width) constructor, a tiny
convolutional network behind it (one strided convolution with batch norm, pooling, a linear head)."""

import torch.nn as nn


class WideResNet(nn.Module):
    def __init__(self, nin, nclass, depth=28, width=2):
        super().__init__()
        channels = 4 * width
        self.layers = nn.Sequential(
            nn.Conv2d(nin, channels, 3, stride=4, padding=1, bias=False),
            nn.BatchNorm2d(channels),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
            nn.Linear(channels, nclass),
        )

    def forward(self, x):
        return self.layers(x)
