"""A stronger method than the baseline's MoCo, written by hand for the signal table (scripts/signal_table.py):
the same MoCo, its loss symmetrised (each view is a query once and a key once) and trained with AdamW and a
short warm-up, which learns faster than SGD in ~300 steps. The rest is the baseline's file.

train.py (protected) builds the backbone (encoder.Backbone, chosen in backbone.json) and calls
  model = EvolvingModel(backbone, config)                config: the dict in config.json
  optimizer, scheduler = model.configure_optimizers(total_steps)
and then, for every batch of its fixed budget (EPOCHS x batches of BATCH_SIZE images),
  loss = model.training_step(views, step)                views: EvolvingTransform's list of tensors
  loss.backward(); optimizer.step(); scheduler.step() (when not None)
After the last step it saves the weights of `backbone` (the object it passed in): that backbone is
what the evaluator probes, so train it in place; do not replace it or change its layers.
"""

from __future__ import annotations

import copy

import torch
import torch.nn as nn
from lightly.loss import NTXentLoss
from lightly.models.modules.heads import MoCoProjectionHead
from lightly.models.utils import batch_shuffle, batch_unshuffle, deactivate_requires_grad, update_momentum


class EvolvingModel(nn.Module):
    """MoCo: a query encoder trained against a momentum (EMA) key encoder with shuffled BN.

    The original keeps 4096 past keys as negatives (NTXentLoss's memory bank) and an EMA momentum
    of 0.99 over 100 epochs. With this task's ~300 steps a bank of stale keys made the loss collapse
    (every embedding equal), so the baseline draws its negatives from the current batch
    (memory_bank_size = 0) and uses a momentum of 0.9; both stay configurable."""

    def __init__(self, backbone: nn.Module, config: dict):
        super().__init__()
        self.config = config
        out_dim = config["proj_output_dim"]
        self.backbone = backbone
        self.projection_head = MoCoProjectionHead(backbone.feature_dim, config["proj_hidden_dim"], out_dim)
        self.backbone_momentum = copy.deepcopy(self.backbone)
        self.projection_head_momentum = copy.deepcopy(self.projection_head)
        deactivate_requires_grad(self.backbone_momentum)
        deactivate_requires_grad(self.projection_head_momentum)
        bank = config["memory_bank_size"]
        self.criterion = NTXentLoss(temperature=config["temperature"],
                                    memory_bank_size=(bank, out_dim) if bank > 0 else 0)

    def training_step(self, views: list[torch.Tensor], step: int) -> torch.Tensor:
        x_1, x_2 = views
        update_momentum(self.backbone, self.backbone_momentum, self.config["ema_momentum"])
        update_momentum(self.projection_head, self.projection_head_momentum, self.config["ema_momentum"])
        return 0.5 * (self._one_way(x_1, x_2) + self._one_way(x_2, x_1))

    def _one_way(self, x_q: torch.Tensor, x_k: torch.Tensor) -> torch.Tensor:
        q = self.projection_head(self.backbone(x_q))
        # shuffled BN: the keys' batch statistics must not reveal which query they belong to
        with torch.no_grad():
            x_k, shuffle = batch_shuffle(x_k)
            k = self.projection_head_momentum(self.backbone_momentum(x_k))
            k = batch_unshuffle(k, shuffle)
        return self.criterion(q, k)

    def configure_optimizers(self, total_steps: int):
        optimizer = torch.optim.AdamW(self.parameters(), lr=self.config["lr"], weight_decay=self.config["weight_decay"])
        warmup = max(1, total_steps // 20)
        schedule = torch.optim.lr_scheduler.SequentialLR(optimizer, [
            torch.optim.lr_scheduler.LinearLR(optimizer, 0.1, 1.0, warmup),
            torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, total_steps - warmup)], [warmup])
        return optimizer, schedule
