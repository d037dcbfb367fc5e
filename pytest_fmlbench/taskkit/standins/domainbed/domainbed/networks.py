"""Featurizers: one small convolutional network for every image size (the stand-in's only backbone)."""

import torch.nn as nn


class SmallCNN(nn.Module):
    n_outputs = 16

    def __init__(self, input_shape):
        super().__init__()
        self.layers = nn.Sequential(
            nn.Conv2d(input_shape[0], 8, 3, stride=2, padding=1), nn.ReLU(), nn.GroupNorm(4, 8),
            nn.Conv2d(8, self.n_outputs, 3, stride=2, padding=1), nn.ReLU(),
            nn.AdaptiveAvgPool2d((1, 1)), nn.Flatten())

    def forward(self, x):
        return self.layers(x)


def Featurizer(input_shape, hparams):
    return SmallCNN(input_shape)


def Classifier(in_features, out_features, is_nonlinear=False):
    if is_nonlinear:
        return nn.Sequential(nn.Linear(in_features, in_features // 2), nn.ReLU(),
                             nn.Linear(in_features // 2, out_features))
    return nn.Linear(in_features, out_features)
