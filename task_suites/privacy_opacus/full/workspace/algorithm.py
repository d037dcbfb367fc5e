"""The method (editable): the network DP-SGD trains, its hyper-parameters, and optional hooks.

Baseline, as in FML-bench's Privacy_opacus: a four-layer CNN (three 3x3 conv blocks with GroupNorm,
since BatchNorm mixes examples and per-example clipping cannot handle it, then a two-layer classifier),
SGD with momentum 0.9 at lr 0.1, 20 epochs, batch size 512, clipping norm 1.0.

Exports:
  get_model(num_classes) -> torch.nn.Module        (Opacus-compatible layers only)
  get_training_config() -> dict                     (epochs, lr, momentum, max_grad_norm, batch_size)
Optional:
  get_optimizer(params, config) -> torch.optim.Optimizer   (the optimizer Opacus wraps; default SGD)
  get_train_transform() -> callable on a (3, 32, 32) float tensor in [0, 1]  (default: random crop with
                           4-pixel padding, horizontal flip, CIFAR normalisation)
  get_eval_transform()  -> the same for evaluation (default: CIFAR normalisation)
The budget (epsilon 8, delta 1e-5) is fixed by train.py; target_epsilon/target_delta here are ignored.
"""

import torch.nn as nn


def _block(c_in: int, c_out: int, pool: nn.Module) -> list[nn.Module]:
    return [nn.Conv2d(c_in, c_out, kernel_size=3, padding=1), nn.GroupNorm(8, c_out), nn.ReLU(), pool]


class ConvNet(nn.Module):
    def __init__(self, num_classes: int = 10):
        super().__init__()
        self.features = nn.Sequential(
            *_block(3, 32, nn.MaxPool2d(2)),
            *_block(32, 64, nn.MaxPool2d(2)),
            *_block(64, 64, nn.AdaptiveAvgPool2d((4, 4))),
        )
        self.classifier = nn.Sequential(nn.Flatten(), nn.Linear(64 * 4 * 4, 128), nn.ReLU(), nn.Linear(128, num_classes))

    def forward(self, x):
        return self.classifier(self.features(x))


def get_model(num_classes: int = 10) -> nn.Module:
    return ConvNet(num_classes)


def get_training_config() -> dict:
    return {"epochs": 20, "lr": 0.1, "momentum": 0.9, "max_grad_norm": 1.0, "batch_size": 512}
