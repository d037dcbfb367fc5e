"""Experiment driver (protected): self-supervised pre-training of the backbone, nothing else.

    python train.py --split val  --out OUT
    python train.py --split test --out OUT

The loop is pretraining.py's (protected too): --split val pre-trains on the unlabeled images of the
train part of data/ with the fixed compute budget below and writes the backbone's weights to
OUT/backbone.pt and checkpoints/backbone.pt; --split test reuses that checkpoint. Each batch becomes
EvolvingTransform's views (transform.py) and EvolvingModel.training_step's loss (model.py).
"""

from __future__ import annotations

from pretraining import Method, load_json, main

# The compute budget belongs to the benchmark, as in the original (which fixes 100 epochs of
# batch 512 on CIFAR-10): scaled down, 8 epochs of batch 64 on about 2400 images.
EPOCHS = 8


def build_method(backbone, config: dict, input_size: int, device, total_steps: int) -> Method:
    import model  # the editable method, next to this file
    import transform  # the editable augmentations

    views_of = transform.EvolvingTransform(input_size, config)
    ssl = model.EvolvingModel(backbone, config).to(device)
    optimizer, scheduler = ssl.configure_optimizers(total_steps)

    def loss(batch, generator, step: int):
        return ssl.training_step([view.to(device) for view in views_of(batch, generator)], step)

    return Method(ssl, optimizer, scheduler, loss)


if __name__ == "__main__":
    main(EPOCHS, lambda: load_json("config.json"), build_method)
