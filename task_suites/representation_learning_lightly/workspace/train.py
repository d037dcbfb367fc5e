"""Experiment driver (protected): self-supervised pre-training of the backbone, nothing else.

    python train.py --split val  --out OUT
    python train.py --split test --out OUT

The loop is pretraining.py's (protected too): --split val pre-trains on the unlabeled images of the
train part of data/ with the fixed compute budget below and writes the backbone's weights to
OUT/backbone.pt and checkpoints/backbone.pt; --split test reuses that checkpoint. Each batch becomes
EvolvingTransform's views (transform.py) and EvolvingModel.training_step's loss (model.py).

Pre-training runs in float64 (the images, the backbone and every tensor the method creates): in float32 a
CPU's instruction set (AVX2, AVX-512) and BLAS changed the last bits of a step, and 300 steps of
self-supervised training amplified them into up to 0.07 of test accuracy; in float64 they stay far below
the score's digits. The weights are saved in float32, the evaluator's dtype.
"""

from __future__ import annotations

from pretraining import Method, load_json, main

# The compute budget belongs to the benchmark, as in the original (which fixes 100 epochs of
# batch 512 on CIFAR-10): scaled down, 8 epochs of batch 64 on about 2400 images.
EPOCHS = 8


class Float32AfterTheLastStep:
    """The method's scheduler (or None), stepped after every batch; after the budget's last step it turns the
    backbone's weights back to float32 in place, as the loop then saves them."""

    def __init__(self, scheduler, backbone, total_steps: int):
        self.scheduler, self.backbone, self.steps_left = scheduler, backbone, total_steps

    def step(self) -> None:
        if self.scheduler is not None:
            self.scheduler.step()
        self.steps_left -= 1
        if self.steps_left == 0:
            self.backbone.float()


def build_method(backbone, config: dict, input_size: int, device, total_steps: int) -> Method:
    import torch

    torch.set_default_dtype(torch.float64)  # before the method builds its heads and losses
    backbone.double()
    import model  # the editable method, next to this file
    import transform  # the editable augmentations

    views_of = transform.EvolvingTransform(input_size, config)
    # and its buffers too: lightly's memory bank is made float32 whatever the default dtype
    ssl = model.EvolvingModel(backbone, config).to(device, torch.float64)
    optimizer, scheduler = ssl.configure_optimizers(total_steps)

    def loss(batch, generator, step: int):
        views = views_of(batch.to(torch.float64), generator)
        return ssl.training_step([view.to(device) for view in views], step)

    return Method(ssl, optimizer, Float32AfterTheLastStep(scheduler, backbone, total_steps), loss)


if __name__ == "__main__":
    main(EPOCHS, lambda: load_json("config.json"), build_method)
