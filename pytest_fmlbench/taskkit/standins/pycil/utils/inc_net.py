"""A backbone with a linear head that grows by the classes of each session."""

import copy

import torch
from torch import nn

from convs.cifar_resnet import resnet32
from convs.linears import SimpleLinear


def get_convnet(args, pretrained=False):
    if args["convnet_type"].lower() != "resnet32":
        raise NotImplementedError(f"Unknown type {args['convnet_type']}")
    return resnet32()


class BaseNet(nn.Module):
    def __init__(self, args, pretrained):
        super().__init__()
        self.convnet = get_convnet(args, pretrained)
        self.fc = None

    @property
    def feature_dim(self):
        return self.convnet.out_dim

    def extract_vector(self, x):
        return self.convnet(x)["features"]

    def forward(self, x):
        out = self.convnet(x)
        out.update(self.fc(out["features"]))
        return out

    def copy(self):
        return copy.deepcopy(self)

    def freeze(self):
        for param in self.parameters():
            param.requires_grad = False
        self.eval()
        return self


class IncrementalNet(BaseNet):
    def update_fc(self, nb_classes):
        fc = SimpleLinear(self.feature_dim, nb_classes)
        if self.fc is not None:
            with torch.no_grad():  # the old classes keep their weights
                fc.weight[: self.fc.out_features] = self.fc.weight
                fc.bias[: self.fc.out_features] = self.fc.bias
        self.fc = fc
