"""The method (editable): self-supervised pre-training under a fixed compute budget.

Baseline, as in FML-bench's Representation_Learning_solo_learn: Barlow Twins on a ResNet-18 adapted to 32x32
images (3x3 stride-1 first convolution, no max pooling, no classifier: 512 features), with a 3-layer projector
(512 -> 2048 -> 2048 -> 2048, batch norm and ReLU between); the loss pushes the cross-correlation of the two
views' batch-normalised projections to the identity (off-diagonal terms weighted by lambda 5e-3). 130 epochs
at batch size 512, SGD at lr 0.4, momentum 0.9, weight decay 1e-4, cosine schedule; the linear probe trains
100 epochs at lr 0.1, batch size 256. Augmentation per view: random resized crop (0.2 to 1), flip, colour
jitter (0.4, 0.4, 0.4, 0.1) at p 0.8, grayscale at p 0.2, Gaussian blur (3x3) at p 0.5, CIFAR-100
normalisation.

train.py uses every export:
  get_model() -> nn.Module                with .backbone, .projector and .backbone_dim (the feature width the
                                          probe reads); forward(x) -> (features, projections)
  get_training_config() -> dict           pretrain_epochs, batch_size, lr, weight_decay, lambda_param,
                                          linear_eval_epochs, linear_lr, linear_batch_size
  get_augmentation() -> callable          PIL image -> tensor; called twice per image for the two views
  BarlowTwinsLoss(lambda_param, embedding_dim=2048)   loss(z1, z2) -> scalar (train.py passes 2048)
"""

import torch
import torch.nn as nn
import torchvision.models as models
import torchvision.transforms as transforms

CIFAR100_MEAN, CIFAR100_STD = (0.5071, 0.4867, 0.4408), (0.2675, 0.2565, 0.2761)


class BarlowTwinsLoss(nn.Module):
    """Redundancy reduction: the cross-correlation of the two views' normalised embeddings towards identity."""

    def __init__(self, lambda_param=5e-3, embedding_dim=2048):
        super().__init__()
        self.lambda_param = lambda_param
        self.bn = nn.BatchNorm1d(embedding_dim, affine=False)

    def forward(self, z1, z2):
        correlation = self.bn(z1).T @ self.bn(z2) / z1.shape[0]
        on_diagonal = (1 - correlation.diagonal()).pow(2).sum()
        off_diagonal = correlation.pow(2).sum() - correlation.diagonal().pow(2).sum()
        return on_diagonal + self.lambda_param * off_diagonal


class ProjectionHead(nn.Module):
    def __init__(self, input_dim=512, hidden_dim=2048, output_dim=2048):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(input_dim, hidden_dim), nn.BatchNorm1d(hidden_dim), nn.ReLU(inplace=True),
            nn.Linear(hidden_dim, hidden_dim), nn.BatchNorm1d(hidden_dim), nn.ReLU(inplace=True),
            nn.Linear(hidden_dim, output_dim),
        )

    def forward(self, x):
        return self.net(x)


class BarlowTwinsModel(nn.Module):
    def __init__(self, proj_hidden_dim=2048, proj_output_dim=2048):
        super().__init__()
        backbone = models.resnet18(weights=None)
        self.backbone_dim = backbone.fc.in_features
        backbone.fc = nn.Identity()
        # 32x32 inputs: a 3x3 stride-1 stem and no max pooling keep the spatial resolution ImageNet's stem drops
        backbone.conv1 = nn.Conv2d(3, 64, 3, 1, 1, bias=False)
        backbone.maxpool = nn.Identity()
        self.backbone = backbone
        self.projector = ProjectionHead(self.backbone_dim, proj_hidden_dim, proj_output_dim)

    def forward(self, x):
        features = self.backbone(x)
        return features, self.projector(features)


def get_model():
    return BarlowTwinsModel(proj_hidden_dim=2048, proj_output_dim=2048)


def get_training_config():
    return {
        "pretrain_epochs": 130,
        "linear_eval_epochs": 100,
        "batch_size": 512,
        "lr": 0.4,
        "weight_decay": 1e-4,
        "lambda_param": 5e-3,
        "linear_lr": 0.1,
        "linear_batch_size": 256,
    }


def get_augmentation():
    return transforms.Compose([
        transforms.RandomResizedCrop(32, scale=(0.2, 1.0)),
        transforms.RandomHorizontalFlip(),
        transforms.RandomApply([transforms.ColorJitter(0.4, 0.4, 0.4, 0.1)], p=0.8),
        transforms.RandomGrayscale(p=0.2),
        transforms.RandomApply([transforms.GaussianBlur(3, sigma=(0.1, 2.0))], p=0.5),
        transforms.ToTensor(),
        transforms.Normalize(CIFAR100_MEAN, CIFAR100_STD),
    ])
