"""Experiment driver (protected): train the defended model on each of the five poisoned pools.

    python train.py --split val  --out OUT   for backdoor i = 0..4: train on the train part of
                                             data/pool{i}_*.npy, classify its val part
    python train.py --split test --out OUT   same training, classify OUT/test{i}_X.npy (the hidden
                                             test inputs, some carrying backdoor i's trigger)

Both splits train the same models on the same examples (the train part chosen by split_config.json),
so the test run reproduces the validated models. Writes OUT/predictions{i}.npy (int64 classes, one
per classified input, in order). The evaluator scores them with labels it keeps to itself.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

from pytest_fmlbench.evalkit import harness_args, load_split_config, split_indices, write_json

import algorithm  # the editable defence, next to this file

N_BACKDOORS = 5
NUM_CLASSES = 10
PIXEL_MAX = 16.0  # digits pixels are integers 0..16
PREDICT_BATCH = 512


def to_images(X: np.ndarray, device: str) -> torch.Tensor:
    return torch.tensor(X / PIXEL_MAX, dtype=torch.float32).reshape(-1, 1, 8, 8).to(device)


def classify(model: torch.nn.Module, X: torch.Tensor) -> np.ndarray:
    model.eval()
    with torch.no_grad():
        scores = torch.cat([model(chunk).cpu() for chunk in X.split(PREDICT_BATCH)])
    if scores.shape != (len(X), NUM_CLASSES):
        sys.exit(f"train.py: the defended model must return ({len(X)}, {NUM_CLASSES}) class scores, "
                 f"got {tuple(scores.shape)}")
    return scores.argmax(dim=1).numpy().astype(np.int64)


def main() -> None:
    args = harness_args()
    if args.out is None:
        sys.exit("train.py: --out is required")
    # One intra-op thread: on 8x8 images more threads buy nothing on a busy machine, and one thread
    # keeps CPU results bit-identical from run to run.
    torch.set_num_threads(1)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    here = Path(__file__).resolve().parent
    config = json.loads((here / "config.json").read_text())
    seed = int(config.get("seed", 0))
    split = load_split_config(here)

    info = []
    for i in range(N_BACKDOORS):
        X = np.load(here / "data" / f"pool{i}_X.npy")
        y = np.load(here / "data" / f"pool{i}_y.npy")
        train_idx, val_idx = split_indices(len(X), split)
        eval_X = X[val_idx] if args.split == "val" else np.load(args.out / f"test{i}_X.npy")

        torch.manual_seed(seed)
        np.random.seed(seed)
        start = time.perf_counter()
        model = algorithm.train_with_defence(to_images(X[train_idx], device),
                                             torch.from_numpy(y[train_idx]).to(device), config)
        predictions = classify(model, to_images(eval_X, device))
        seconds = time.perf_counter() - start
        args.out.mkdir(parents=True, exist_ok=True)
        np.save(args.out / f"predictions{i}.npy", predictions)
        info.append({"backdoor": i, "n_train": len(train_idx), "n_classified": len(eval_X), "seconds": seconds})
        # agreement with the (possibly poisoned) labels is all the experiment can see; the score
        # separates clean accuracy from attack success with marks only the evaluator holds
        note = f", agreement with val labels {np.mean(predictions == y[val_idx]):.3f}" if args.split == "val" else ""
        print(f"[{args.split}] backdoor {i}: trained on {len(train_idx)} images in {seconds:.1f}s{note}")
    write_json(args.out / "run_info.json", {"split": args.split, "backdoors": info})


if __name__ == "__main__":
    main()
