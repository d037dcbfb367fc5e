"""The method (editable): self-supervised pre-training of the backbone, as a Lightning module.

Baseline, as in FML-bench's Representation_Learning_lightly (Lightly's MoCo example on CIFAR-10): lightly's
CIFAR ResNet-18 (3x3 stem, no max pooling, batch norm split over 8 groups of the batch, which stands in for
MoCo's shuffled batch norm on one GPU) without its classifier, pooled to 512 features; a MoCo projection head
(512 -> 512 -> 128); a momentum copy of both updated with momentum 0.99; the key batch shuffled and unshuffled
around the momentum encoder; contrastive loss (NT-Xent, temperature 0.1) against a memory bank of 4,096 keys;
SGD at the lr train.py passes (0.06), momentum 0.9, weight decay 5e-4, cosine schedule over max_epochs.

train.py builds EvolvingModel(lr=..., memory_bank_size=..., max_epochs=...) (keep that signature), fits it
with a Lightning Trainer on batches (views, labels) whose views are EvolvingTransform's output for the
batch's images, then freezes `self.backbone` and fits a linear classifier on its flattened output, which
must stay 512 features per image. Pre-train without the labels: the probe alone may use them.
"""

import copy

import pytorch_lightning as pl
import torch
import torch.nn as nn
from lightly.loss import NTXentLoss
from lightly.models import ResNetGenerator
from lightly.models.modules.heads import MoCoProjectionHead
from lightly.models.utils import batch_shuffle, batch_unshuffle, deactivate_requires_grad, update_momentum

FEATURES, PROJECTION = 512, 128
TEMPERATURE, MOMENTUM = 0.1, 0.99


class EvolvingModel(pl.LightningModule):
    """MoCo (v2 heads) with a memory bank, on lightly's ResNet-18."""

    def __init__(self, lr=0.06, memory_bank_size=4096, max_epochs=100):
        super().__init__()
        self.lr, self.memory_bank_size, self.max_epochs = lr, memory_bank_size, max_epochs
        resnet = ResNetGenerator("resnet-18", 1, num_splits=8)
        self.backbone = nn.Sequential(*list(resnet.children())[:-1], nn.AdaptiveAvgPool2d(1))
        self.projection_head = MoCoProjectionHead(FEATURES, FEATURES, PROJECTION)
        self.backbone_momentum = copy.deepcopy(self.backbone)
        self.projection_head_momentum = copy.deepcopy(self.projection_head)
        deactivate_requires_grad(self.backbone_momentum)
        deactivate_requires_grad(self.projection_head_momentum)
        self.criterion = NTXentLoss(temperature=TEMPERATURE, memory_bank_size=(memory_bank_size, PROJECTION))

    def training_step(self, batch, batch_idx):
        x_query, x_key = batch[0]
        update_momentum(self.backbone, self.backbone_momentum, MOMENTUM)
        update_momentum(self.projection_head, self.projection_head_momentum, MOMENTUM)
        query = self.projection_head(self.backbone(x_query).flatten(start_dim=1))
        # shuffled across the batch-norm groups, so that no key is normalised with its own query's statistics
        shuffled, order = batch_shuffle(x_key)
        key = self.projection_head_momentum(self.backbone_momentum(shuffled).flatten(start_dim=1))
        key = batch_unshuffle(key, order)
        loss = self.criterion(query, key)
        self.log("train_loss_ssl", loss, on_epoch=True, prog_bar=True)
        return loss

    def configure_optimizers(self):
        optimizer = torch.optim.SGD(self.parameters(), lr=self.lr, momentum=0.9, weight_decay=5e-4)
        return [optimizer], [torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, self.max_epochs)]
