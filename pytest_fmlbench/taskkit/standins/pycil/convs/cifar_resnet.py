"""Backbones: the stand-in names one small convolutional network after PyCIL's CIFAR ResNet-32."""

import torch.nn as nn


class SmallConvNet(nn.Module):
    out_dim = 16

    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
            nn.Conv2d(8, self.out_dim, 3, stride=2, padding=1), nn.BatchNorm2d(self.out_dim), nn.ReLU())
        self.pool = nn.AdaptiveAvgPool2d(1)

    def forward(self, x):
        fmap = self.body(x)
        return {"fmaps": [fmap], "features": self.pool(fmap).flatten(1)}


def resnet32():
    return SmallConvNet()
