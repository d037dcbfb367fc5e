"""Experiment driver (protected): DomainBed's ERM training loop on ColoredMNIST, test environment 2, as
FML-bench's Generalization_domainbed runs `domainbed.scripts.train` (seed 0, DomainBed's default
hyper-parameters for ERM on ColoredMNIST, 5,001 steps, one minibatch per training environment per step).

    python train.py --split val  --out OUT   train on environments 0 and 1 (their in-splits), save
                                             model_checkpoint/model.pkl, predict environment 2's out-split
    python train.py --split test --out OUT   load model_checkpoint/model.pkl (no training), predict
                                             OUT/test_images.npy (environment 2's in-split)

The algorithm is always `algorithms.get_algorithm_class("ERM")`, built with (input_shape, num_classes,
num_domains, hparams); change the ERM class (domainbed/algorithms.py) and the networks
(domainbed/networks.py). Writes OUT/predictions.npy (int64 labels). --scale smoke runs a few steps of
small batches, for checking the code path on fixture data.
"""

from __future__ import annotations

import collections
import random
import sys
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import TensorDataset

from pytest_fmlbench.evalkit import harness_args

from domainbed import algorithms, hparams_registry  # DomainBed at the pinned commit, next to this file
from domainbed.lib.fast_data_loader import InfiniteDataLoader

ALGORITHM, DATASET = "ERM", "ColoredMNIST"
INPUT_SHAPE, NUM_CLASSES = (2, 28, 28), 2
TRAIN_ENVS, TEST_ENV = (0, 1), 2
# datasets.ColoredMNIST's class attributes (MultipleDomainDataset's defaults)
N_STEPS, CHECKPOINT_FREQ, N_WORKERS = 5001, 100, 8
SMOKE_STEPS, SMOKE_BATCH = 3, 8
SEED = 0
DATA, CHECKPOINT = Path("data"), Path("model_checkpoint")
EVAL_BATCH = 64


def tensors(prefix: str, with_labels: bool = True):
    images = torch.from_numpy(np.load(DATA / f"{prefix}_images.npy")).float().div_(255.0)
    if not with_labels:
        return images
    return images, torch.from_numpy(np.load(DATA / f"{prefix}_labels.npy")).long()


def predict(algorithm, images: torch.Tensor, device: str) -> np.ndarray:
    """Class labels as misc.accuracy reads them: argmax of the logits, or logit > 0 for a single one."""
    algorithm.eval()
    out = []
    with torch.no_grad():
        for start in range(0, len(images), EVAL_BATCH):
            logits = algorithm.predict(images[start:start + EVAL_BATCH].to(device))
            out.append((logits[:, 0] > 0).long() if logits.size(1) == 1 else logits.argmax(1))
    algorithm.train()
    return torch.cat(out).cpu().numpy().astype(np.int64)


def accuracy(algorithm, images: torch.Tensor, labels: torch.Tensor, device: str) -> float:
    return float(np.mean(predict(algorithm, images, device) == labels.numpy()))


def build(hparams: dict, device: str):
    algorithm = algorithms.get_algorithm_class(ALGORITHM)(INPUT_SHAPE, NUM_CLASSES, len(TRAIN_ENVS), hparams)
    return algorithm.to(device)


def train(hparams: dict, steps: int, workers: int, device: str):
    train_sets = [TensorDataset(*tensors(f"env{i}_in")) for i in TRAIN_ENVS]
    monitor = {f"env{i}_{part}": tensors(f"env{i}_{part}") for i in TRAIN_ENVS for part in ("in", "out")}
    loaders = [InfiniteDataLoader(dataset=env, weights=None, batch_size=hparams["batch_size"], num_workers=workers)
               for env in train_sets]
    algorithm = build(hparams, device)
    minibatches = zip(*loaders)
    steps_per_epoch = min(len(env) / hparams["batch_size"] for env in train_sets)
    logged = collections.defaultdict(list)
    for step in range(steps):
        batch = [(x.to(device), y.to(device)) for x, y in next(minibatches)]
        for key, value in algorithm.update(batch, None).items():
            logged[key].append(value)
        if step % CHECKPOINT_FREQ == 0 or step == steps - 1:
            row = {"step": step, "epoch": round(step / steps_per_epoch, 3)}
            row.update({key: round(float(np.mean(values)), 6) for key, values in logged.items()})
            row.update({f"{name}_acc": round(accuracy(algorithm, x, y, device), 6) for name, (x, y) in monitor.items()})
            print(" ".join(f"{key}={value}" for key, value in row.items()), flush=True)
            logged.clear()
    return algorithm


def main() -> None:
    args = harness_args()
    if args.out is None:
        sys.exit("train.py: --out is required")
    random.seed(SEED)
    np.random.seed(SEED)
    torch.manual_seed(SEED)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    device = "cuda" if torch.cuda.is_available() else "cpu"
    smoke = args.scale == "smoke"
    args.out.mkdir(parents=True, exist_ok=True)

    if args.split == "val":
        hparams = hparams_registry.default_hparams(ALGORITHM, DATASET)
        if smoke:
            hparams["batch_size"] = min(hparams["batch_size"], SMOKE_BATCH)
        print("hparams: " + ", ".join(f"{key}={value}" for key, value in sorted(hparams.items())), flush=True)
        algorithm = train(hparams, SMOKE_STEPS if smoke else N_STEPS, 0 if smoke else N_WORKERS, device)
        CHECKPOINT.mkdir(exist_ok=True)
        # DomainBed's save_checkpoint layout
        torch.save({"model_input_shape": INPUT_SHAPE, "model_num_classes": NUM_CLASSES,
                    "model_num_domains": len(TRAIN_ENVS), "model_hparams": hparams,
                    "model_dict": algorithm.state_dict()}, CHECKPOINT / "model.pkl")
        images = tensors(f"env{TEST_ENV}_out", with_labels=False)
    else:
        if not (CHECKPOINT / "model.pkl").is_file():
            sys.exit("train.py: no model_checkpoint/model.pkl: the test run needs the val run's checkpoint")
        saved = torch.load(CHECKPOINT / "model.pkl", map_location=device, weights_only=False)
        algorithm = build(saved["model_hparams"], device)
        algorithm.load_state_dict(saved["model_dict"])
        images = torch.from_numpy(np.load(args.out / "test_images.npy")).float().div_(255.0)
    np.save(args.out / "predictions.npy", predict(algorithm, images, device))


if __name__ == "__main__":
    main()
