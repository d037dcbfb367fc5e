"""Experiment driver (protected): DomainBed's training loop on ColoredMNIST-on-digits, test env 2.

    python train.py --split val  --out OUT   train, predict data/val_X.npy (the held-out env's validation part)
    python train.py --split test --out OUT   same training, predict OUT/test_X.npy (the rest of the held-out env)

As DomainBed's scripts/train.py: each training environment is cut into an in-split (training) and an
out-split (held out, its accuracy printed as a diagnostic) by split_config.json; each step draws one
minibatch per environment (with replacement, as DomainBed's InfiniteDataLoader) and calls
algorithm.update; the model after the last step is the one evaluated. Both splits train the same model,
so the test run reproduces the validated one. Writes OUT/predictions.npy (int64 class labels).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

from pytest_fmlbench.evalkit import harness_args, load_split_config, split_indices, write_json

import algorithms  # the editable method, next to this file

TRAIN_ENVS = (0, 1)
NUM_CLASSES = 2
INPUT_SHAPE = (2, 8, 8)
PIXEL_MAX = 16.0  # sklearn's digits have integer pixels 0..16
LOG_EVERY = 100


def to_tensor(X: np.ndarray) -> torch.Tensor:
    return torch.tensor(X / PIXEL_MAX, dtype=torch.float32)


def predict(algorithm, X: torch.Tensor, device: str) -> np.ndarray:
    algorithm.eval()
    with torch.no_grad():
        logits = torch.cat([algorithm.predict(chunk.to(device)).cpu() for chunk in X.split(512)])
    algorithm.train()
    return logits.argmax(dim=1).numpy().astype(np.int64)


def main() -> None:
    args = harness_args()
    if args.out is None:
        sys.exit("train.py: --out is required")
    # one intra-op thread: the images are tiny, and one thread makes CPU runs bit-reproducible
    torch.set_num_threads(1)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    here = Path(__file__).resolve().parent
    hparams = json.loads((here / "hparams.json").read_text())
    for key in ("steps", "batch_size"):
        if not isinstance(hparams.get(key), int) or hparams[key] < 1:
            sys.exit(f"train.py: hparams.json needs a positive integer {key!r}")
    seed = int(hparams.get("seed", 0))

    split_config = load_split_config(here)
    train_sets, out_sets = [], []
    for e in TRAIN_ENVS:
        X, y = np.load(here / "data" / f"env{e}_X.npy"), np.load(here / "data" / f"env{e}_y.npy")
        in_idx, out_idx = split_indices(len(y), split_config)
        train_sets.append((to_tensor(X[in_idx]), torch.from_numpy(y[in_idx])))
        out_sets.append((to_tensor(X[out_idx]), torch.from_numpy(y[out_idx])))

    torch.manual_seed(seed)
    np.random.seed(seed)
    algorithm = algorithms.build_algorithm(INPUT_SHAPE, NUM_CLASSES, len(TRAIN_ENVS), hparams).to(device)
    algorithm.train()
    sampler = torch.Generator().manual_seed(seed)
    started, history = time.perf_counter(), []
    for step in range(hparams["steps"]):
        minibatches = []
        for X, y in train_sets:
            idx = torch.randint(len(y), (hparams["batch_size"],), generator=sampler)
            minibatches.append((X[idx].to(device), y[idx].to(device)))
        history.append(algorithm.update(minibatches, None))
        if (step + 1) % LOG_EVERY == 0 or step + 1 == hparams["steps"]:
            recent = history[-LOG_EVERY:]
            keys = sorted({k for h in recent for k in h})
            stats = ", ".join(f"{k} {np.mean([h[k] for h in recent if k in h]):.4f}" for k in keys)
            print(f"step {step + 1}/{hparams['steps']}: {stats}", flush=True)

    # a diagnostic only (DomainBed's training-domain validation); the score comes from the evaluator
    accs = [float(np.mean(predict(algorithm, X, device) == y.numpy())) for X, y in out_sets]
    print("training environments' out-splits (diagnostic): " + ", ".join(
        f"env{e}_out_acc {a:.4f}" for e, a in zip(TRAIN_ENVS, accs)))
    images = here / "data" / "val_X.npy" if args.split == "val" else args.out / "test_X.npy"
    predictions = predict(algorithm, to_tensor(np.load(images)), device)
    args.out.mkdir(parents=True, exist_ok=True)
    np.save(args.out / "predictions.npy", predictions)
    write_json(args.out / "run_info.json", {"steps": hparams["steps"], "train_seconds": time.perf_counter() - started,
                                            "device": device})


if __name__ == "__main__":
    main()
