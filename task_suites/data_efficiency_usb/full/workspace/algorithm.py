"""The method (editable): the network, FixMatch's hyper-parameters and the strong augmentation.

Baseline, as in FML-bench's Data_Efficiency_usb: a WideResNet-28-2 (pre-activation blocks with batch
normalisation), 15,000 steps of FixMatch at 64 labelled + 64 unlabelled images per step, SGD (Nesterov)
at lr 0.03, momentum 0.9, weight decay 5e-4, confidence threshold 0.95, lambda_u 1, temperature 1.

Exports (train.py uses all three):
  get_model(num_classes) -> torch.nn.Module          maps normalised (N, 3, 32, 32) images to (N, num_classes)
  get_training_config() -> dict                       total_steps, batch_size_labeled, batch_size_unlabeled,
                                                      lr, momentum, weight_decay, threshold, lambda_u, T
                                                      (eval_every: how often train.py logs)
  RandAugment(n, m)                                   the strong augmentation: a callable on a PIL image
"""

import numpy as np
import torch.nn as nn
import torch.nn.functional as F
import torchvision.transforms as T


class PreActBlock(nn.Module):
    """BN-ReLU-conv, BN-ReLU-conv; the shortcut starts from the first activation (a 1x1 conv where the
    shape changes)."""

    def __init__(self, c_in: int, c_out: int, stride: int):
        super().__init__()
        self.bn1, self.bn2 = nn.BatchNorm2d(c_in), nn.BatchNorm2d(c_out)
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=False)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, padding=1, bias=False)
        reshape = stride != 1 or c_in != c_out
        self.shortcut = nn.Conv2d(c_in, c_out, 1, stride=stride, bias=False) if reshape else nn.Identity()

    def forward(self, x):
        activated = F.relu(self.bn1(x))
        out = self.conv2(F.relu(self.bn2(self.conv1(activated))))
        return out + self.shortcut(activated)


class WideResNet(nn.Module):
    def __init__(self, depth: int = 28, widen: int = 2, num_classes: int = 100):
        super().__init__()
        per_group = (depth - 4) // 6
        widths = [16, 16 * widen, 32 * widen, 64 * widen]
        self.stem = nn.Conv2d(3, widths[0], 3, padding=1, bias=False)
        groups = []
        for g, stride in enumerate((1, 2, 2)):
            blocks = [PreActBlock(widths[g], widths[g + 1], stride)]
            blocks += [PreActBlock(widths[g + 1], widths[g + 1], 1) for _ in range(per_group - 1)]
            groups.append(nn.Sequential(*blocks))
        self.groups = nn.Sequential(*groups)
        self.bn = nn.BatchNorm2d(widths[-1])
        self.fc = nn.Linear(widths[-1], num_classes)

    def forward(self, x):
        out = F.relu(self.bn(self.groups(self.stem(x))))
        return self.fc(F.adaptive_avg_pool2d(out, 1).flatten(1))


def get_model(num_classes: int = 100) -> nn.Module:
    return WideResNet(depth=28, widen=2, num_classes=num_classes)


def get_training_config() -> dict:
    return {"total_steps": 15000, "eval_every": 1500, "batch_size_labeled": 64, "batch_size_unlabeled": 64,
            "lr": 0.03, "momentum": 0.9, "weight_decay": 5e-4, "threshold": 0.95, "lambda_u": 1.0, "T": 1.0,
            "num_labels": 200}


class RandAugment:
    """n operations drawn without replacement from six torchvision transforms, applied in turn (m unused, as
    in the original's baseline)."""

    def __init__(self, n: int = 2, m: int = 10):
        self.n, self.m = n, m
        self.operations = [
            T.RandomAffine(degrees=15, translate=(0.1, 0.1)),
            T.RandomHorizontalFlip(p=1.0),
            T.ColorJitter(brightness=0.4, contrast=0.4, saturation=0.4),
            T.RandomGrayscale(p=1.0),
            T.RandomAutocontrast(p=1.0),
            T.RandomEqualize(p=1.0),
        ]

    def __call__(self, image):
        for index in np.random.choice(len(self.operations), self.n, replace=False):
            image = self.operations[index](image)
        return image
