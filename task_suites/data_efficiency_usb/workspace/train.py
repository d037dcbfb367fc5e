"""Experiment driver (protected): semi-supervised training on the digits, as USB's training loop.

    python train.py --split val  --out OUT   train, predict the validation rows of the unlabeled pool
    python train.py --split test --out OUT   same training, predict OUT/test_X.npy (hidden test digits)

split_config.json holds a part of the unlabeled pool out for validation (the evaluator has its labels);
the rest, together with the labeled digits, is what the method learns from. Each step draws a batch of
`batch_size` labeled digits and `uratio * batch_size` unlabeled ones, each sampler going through its set
in a fresh random order every epoch (a shuffled, drop-last loader), and calls algorithm.train_step.
Both splits train the same model, so the test run reproduces the validated one.
Writes OUT/predictions.npy (int64 class labels).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import torch

from pytest_fmlbench.evalkit import harness_args, load_split_config, split_indices, write_json

import algorithm  # the editable method, next to this file

NUM_CLASSES = 10
PIXEL_MAX = 16.0  # sklearn's digits have integer pixels 0..16
LOG_EVERY = 100


def to_images(X: np.ndarray) -> torch.Tensor:
    return torch.tensor(X / PIXEL_MAX, dtype=torch.float32).reshape(-1, 1, 8, 8)


class EpochSampler:
    """Batches of indices, a new random order each epoch, incomplete last batch dropped."""

    def __init__(self, n: int, batch_size: int, generator: torch.Generator):
        if batch_size > n:
            sys.exit(f"train.py: a batch of {batch_size} is larger than the {n} examples it is drawn from")
        self.n, self.batch_size, self.generator = n, batch_size, generator
        self.order, self.pos = torch.randperm(n, generator=generator), 0

    def next(self) -> torch.Tensor:
        if self.pos + self.batch_size > self.n:
            self.order, self.pos = torch.randperm(self.n, generator=self.generator), 0
        batch = self.order[self.pos:self.pos + self.batch_size]
        self.pos += self.batch_size
        return batch


def main() -> None:
    args = harness_args()
    if args.out is None:
        sys.exit("train.py: --out is required")
    # one intra-op thread: the images are tiny, and one thread makes CPU runs bit-reproducible
    torch.set_num_threads(1)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    here = Path(__file__).resolve().parent
    config = algorithm.get_training_config()
    for key in ("total_steps", "batch_size", "uratio"):
        if not isinstance(config.get(key), int) or config[key] < 1:
            sys.exit(f"train.py: config needs a positive integer {key!r}")
    seed = int(config.get("seed", 0))

    x_lb = to_images(np.load(here / "data" / "labeled_X.npy"))
    y_lb = torch.from_numpy(np.load(here / "data" / "labeled_y.npy"))
    pool = np.load(here / "data" / "unlabeled_X.npy")
    train_rows, val_rows = split_indices(len(pool), load_split_config(here))
    x_ulb = to_images(pool[train_rows])
    eval_X = to_images(pool[val_rows] if args.split == "val" else np.load(args.out / "test_X.npy"))

    torch.manual_seed(seed)
    np.random.seed(seed)
    alg = algorithm.build_algorithm(NUM_CLASSES, len(x_ulb), config, device)
    generator = torch.Generator().manual_seed(seed)
    labeled = EpochSampler(len(x_lb), min(config["batch_size"], len(x_lb)), generator)
    unlabeled = EpochSampler(len(x_ulb), config["uratio"] * config["batch_size"], generator)
    print(f"labeled {len(x_lb)}, unlabeled {len(x_ulb)}, evaluating {len(eval_X)} ({args.split})", flush=True)
    started, history = time.perf_counter(), []
    for step in range(config["total_steps"]):
        i_lb, i_ulb = labeled.next(), unlabeled.next()
        history.append(alg.train_step(x_lb[i_lb], y_lb[i_lb], x_ulb[i_ulb], i_ulb, step))
        if (step + 1) % LOG_EVERY == 0 or step + 1 == config["total_steps"]:
            recent = history[-LOG_EVERY:]
            keys = sorted({k for h in recent for k in h})
            stats = ", ".join(f"{k} {np.mean([h[k] for h in recent if k in h]):.4f}" for k in keys)
            print(f"step {step + 1}/{config['total_steps']}: {stats}", flush=True)

    with torch.no_grad():
        logits = torch.cat([alg.predict(chunk).cpu() for chunk in eval_X.split(512)])
    predictions = logits.argmax(dim=1).numpy().astype(np.int64)
    args.out.mkdir(parents=True, exist_ok=True)
    np.save(args.out / "predictions.npy", predictions)
    write_json(args.out / "run_info.json", {"steps": config["total_steps"], "device": device,
                                            "train_seconds": time.perf_counter() - started})


if __name__ == "__main__":
    main()
