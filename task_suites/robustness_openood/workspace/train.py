"""Experiment driver (protected): train a classifier on in-distribution digits, score inputs for OOD.

    python train.py --split val  --out OUT   train on the train part of data/, score the val digits
                                             followed by data/val_ood_X.npy (near-OOD letters)
    python train.py --split test --out OUT   same training, score OUT/test_X.npy (hidden test inputs:
                                             digits and images from another, hidden OOD source, mixed)

Both splits train the same model on the same examples (the train part chosen by split_config.json),
so the test run reproduces the validated model. Writes OUT/scores.npy (float64, higher = more
in-distribution, one per scored input, in order) and OUT/predictions.npy (int64 predicted classes).
The evaluator computes AUROC and the rest from them with labels it keeps to itself.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

from pytest_fmlbench.evalkit import harness_args, load_split_config, split_indices, write_json

import algorithm  # the editable method, next to this file

NUM_CLASSES = 10
PIXEL_MAX = 16.0  # digits pixels are integers 0..16
SCORE_BATCH = 512


def to_images(X: np.ndarray, device: str) -> torch.Tensor:
    return torch.tensor(X / PIXEL_MAX, dtype=torch.float32).reshape(-1, 1, 8, 8).to(device)


def score_all(model, detector, X: torch.Tensor, config: dict) -> tuple[np.ndarray, np.ndarray]:
    model.eval()
    scores, classes = [], []
    for chunk in X.split(SCORE_BATCH):
        score = algorithm.id_score(model, detector, chunk, config)
        if not isinstance(score, torch.Tensor) or score.shape != (len(chunk),):
            sys.exit(f"train.py: id_score must return a tensor of shape ({len(chunk)},), "
                     f"got {getattr(score, 'shape', type(score).__name__)}")
        with torch.no_grad():
            logits = model(chunk)
        scores.append(score.detach().double().cpu())
        classes.append(logits.argmax(dim=1).cpu())
    return torch.cat(scores).numpy(), torch.cat(classes).numpy().astype(np.int64)


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

    X = np.load(here / "data" / "visible_X.npy")
    y = np.load(here / "data" / "visible_y.npy")
    train_idx, val_idx = split_indices(len(X), load_split_config(here))
    if args.split == "val":
        eval_X = np.concatenate([X[val_idx], np.load(here / "data" / "val_ood_X.npy")])
    else:
        eval_X = np.load(args.out / "test_X.npy")

    torch.manual_seed(seed)
    np.random.seed(seed)
    start = time.perf_counter()
    X_train = to_images(X[train_idx], device)
    y_train = torch.from_numpy(y[train_idx]).to(device)
    model = algorithm.build_model(NUM_CLASSES, config).to(device)
    algorithm.train_model(model, X_train, y_train, config)
    model.eval()
    detector = algorithm.fit_detector(model, X_train, y_train, config)
    scores, classes = score_all(model, detector, to_images(eval_X, device), config)
    seconds = time.perf_counter() - start
    if not np.all(np.isfinite(scores)):
        sys.exit("train.py: id_score returned NaN or infinite scores")

    args.out.mkdir(parents=True, exist_ok=True)
    np.save(args.out / "scores.npy", scores)
    np.save(args.out / "predictions.npy", classes)
    write_json(args.out / "run_info.json", {"split": args.split, "n_train": len(train_idx),
                                            "n_scored": len(eval_X), "seconds": seconds})
    print(f"[{args.split}] trained on {len(train_idx)} digits, scored {len(eval_X)} inputs in {seconds:.1f}s")
    if args.split == "val":  # a diagnostic only; the score comes from the evaluator
        n_val = len(val_idx)
        print(f"val digit accuracy (diagnostic) {np.mean(classes[:n_val] == y[val_idx]):.4f}")


if __name__ == "__main__":
    main()
