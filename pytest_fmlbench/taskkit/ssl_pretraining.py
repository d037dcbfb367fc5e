"""The pre-training loop of the representation-learning tasks (protected): self-supervised training of
the backbone on the unlabeled images of the train part of data/, under the task's fixed budget.

Every workspace of those tasks receives a copy of ``pytest_fmlbench.taskkit.ssl_pretraining`` as
pretraining.py, beside encoder.py (the copy of ``cifar_resnet``, which it imports); the package itself
never imports this module. The task's train.py names the budget and how its editable method turns a
batch into a loss, and calls ``main``:

--split val pre-trains on the images of the train part (the part split_config.json chooses) and writes
the trained backbone's weights to OUT/backbone.pt (a plain state dict) and to checkpoints/backbone.pt.
--split test, as in the originals, reuses that checkpoint (the harness re-runs validation on the best
code in a fresh workspace just before the test), and pre-trains the same way only if it is missing.
Nothing here sees a label or a hidden-test image; the evaluator builds the same backbone from its own
copy of the family, loads these weights, extracts features and fits the linear probe itself.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, NoReturn

from pytest_fmlbench.evalkit import harness_args, load_split_config, split_indices

BATCH_SIZE = 64
CHECKPOINT = Path("checkpoints/backbone.pt")
WEIGHTS = "backbone.pt"


def fail(message: str) -> NoReturn:
    sys.exit(f"train.py: {message}")


def load_json(name: str) -> dict:
    try:
        value = json.loads(Path(name).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        fail(f"cannot read {name}: {exc}")
    if not isinstance(value, dict):
        fail(f"{name} must hold a JSON object")
    return value


@dataclass
class Method:
    """What the editable method hands the loop: the module that holds the backbone (trained in place), its
    optimizer and scheduler (stepped after every batch, when not None), and ``loss(batch, generator, step)``,
    a scalar loss for a batch of float images (N, 3, 16, 16) in [0, 1], random draws from ``generator``."""

    model: Any
    optimizer: Any
    scheduler: Any
    loss: Callable[[Any, Any, int], Any]


# (backbone, config, input size, device, total steps) -> the method, built from the editable files
BuildMethod = Callable[[Any, dict, int, Any, int], Method]


def main(epochs: int, load_config: Callable[[], dict], build: BuildMethod) -> None:
    args = harness_args()
    if args.out is None:
        fail("--out is required")
    args.out.mkdir(parents=True, exist_ok=True)
    if args.split == "test" and CHECKPOINT.is_file():
        shutil.copyfile(CHECKPOINT, args.out / WEIGHTS)
        print(f"test: the weights pre-trained by the validation run ({CHECKPOINT}) are in {args.out / WEIGHTS}")
        return
    pretrain(args.out, epochs, load_config, build)


def pretrain(out: Path, epochs: int, load_config: Callable[[], dict], build: BuildMethod) -> None:
    # imported here: a test run that reuses the checkpoint needs neither torch nor the method
    import numpy as np
    import torch
    from pydantic import ValidationError

    import encoder  # the workspace's copy of the backbone family, beside this file

    # one thread: bit-reproducible on CPU, and faster than contended threads on a busy 2-core box
    torch.set_num_threads(1)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    config = load_config()
    try:
        spec = encoder.BackboneSpec.model_validate(load_json("backbone.json"))
    except ValidationError as exc:
        fail(f"backbone.json is invalid: {exc.errors()[0]['msg']}")
    images = np.load("data/visible_X.npy", allow_pickle=False)
    train_idx, _ = split_indices(len(images), load_split_config(Path.cwd()))
    pool = torch.from_numpy(images[train_idx]).permute(0, 3, 1, 2).float().div(255)

    seed = int(config.get("seed", 1))
    torch.manual_seed(seed)
    np.random.seed(seed)
    generator = torch.Generator().manual_seed(seed)  # batches and augmentations draw from it
    backbone = encoder.build(spec)
    steps_per_epoch = len(pool) // BATCH_SIZE
    total_steps = epochs * steps_per_epoch
    method = build(backbone, config, encoder.INPUT_SIZE, device, total_steps)

    started = time.perf_counter()
    step = 0
    method.model.train()
    for epoch in range(epochs):
        order = torch.randperm(len(pool), generator=generator)
        total = 0.0
        for i in range(steps_per_epoch):
            batch = pool[order[i * BATCH_SIZE:(i + 1) * BATCH_SIZE]]
            loss = method.loss(batch, generator, step)
            if not torch.isfinite(loss):
                fail(f"the loss is {loss.item()} at step {step}")
            method.optimizer.zero_grad()
            loss.backward()
            method.optimizer.step()
            if method.scheduler is not None:
                method.scheduler.step()
            total += loss.item()
            step += 1
        print(f"epoch {epoch + 1}/{epochs}: ssl loss {total / steps_per_epoch:.4f} "
              f"({time.perf_counter() - started:.1f} s)")

    state = {name: tensor.detach().cpu().contiguous() for name, tensor in backbone.state_dict().items()}
    torch.save(state, out / WEIGHTS)
    try:  # for the test run; if the workspace cannot take it, the test run pre-trains again
        CHECKPOINT.parent.mkdir(exist_ok=True)
        shutil.copyfile(out / WEIGHTS, CHECKPOINT)
    except OSError as exc:
        print(f"could not keep a checkpoint for the test run: {exc}")
    params, macs = encoder.cost(spec)
    max_params, max_macs = encoder.budget()
    print(f"saved {spec.name} width {spec.width} ({params} parameters, {macs} MACs per image; budget "
          f"{max_params} / {max_macs}), {total_steps} steps on {len(pool)} unlabeled images")
