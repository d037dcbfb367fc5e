"""Experiment driver (protected): class-incremental learning on split digits, contexts in a fixed order.

    python train.py --split val  --out OUT   learn the five contexts, predicting the val part after each
    python train.py --split test --out OUT   the same learning, predicting OUT/test_X.npy after each

train.py owns the protocol. It hands the learner one context at a time, {0,1}, {2,3}, ..., {8,9}: the
training images and labels of that context only, then asks it to label every scored input with a class
seen so far. The learner never receives another context's data, and never a label of a scored input.
After each context train.py records what the learner holds (session_audit.py): the parameter count of
its torch modules, and how many raw images it kept. Writes OUT/predictions.npy (int64, one row per
context: the labels predicted after it) and OUT/run_info.json (that record).
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import numpy as np
import torch

from data_guard import seal
from pytest_fmlbench.evalkit import harness_args, load_split_config, split_indices, write_json
from session_audit import RowIndex, count_parameters, reachable

NUM_CLASSES = 10
CONTEXTS = [(0, 1), (2, 3), (4, 5), (6, 7), (8, 9)]  # split-MNIST's order
PIXEL_MAX = 16.0  # digits pixels are integers 0..16: a public bound
IMAGE_SIZE = 64


def to_images(X: np.ndarray) -> torch.Tensor:
    return torch.tensor(X / PIXEL_MAX, dtype=torch.float32).reshape(-1, 1, 8, 8)


def as_labels(pred, n: int) -> np.ndarray:
    pred = pred.detach().cpu().numpy() if isinstance(pred, torch.Tensor) else np.asarray(pred)
    if pred.shape != (n,) or not np.issubdtype(pred.dtype, np.integer):
        sys.exit(f"train.py: predict() must return {n} integer labels, got shape {pred.shape} dtype {pred.dtype}")
    return pred.astype(np.int64)


def main() -> None:
    args = harness_args()
    if args.out is None:
        sys.exit("train.py: --out is required")
    # one intra-op thread: results are bit-identical run to run, and on 8x8 images more threads only cost
    torch.set_num_threads(1)
    device = "cuda" if torch.cuda.is_available() else "cpu"

    X = np.load("data/visible_X.npy")
    y = np.load("data/visible_y.npy")
    train_idx, val_idx = split_indices(len(X), load_split_config(Path.cwd()))
    eval_X = X[val_idx] if args.split == "val" else np.load(args.out / "test_X.npy")
    X_train, y_train = X[train_idx], y[train_idx]
    # from here on the data reaches the method only through the calls below
    seal([Path("data"), args.out / "test_X.npy"])
    algorithm = importlib.import_module("algorithm")

    config = algorithm.get_config()
    seed = int(config.get("seed", 0))
    torch.manual_seed(seed)
    np.random.seed(seed)
    learner = algorithm.build_learner(NUM_CLASSES, config, device)

    eval_images = to_images(eval_X)
    seen_train, seen_eval = RowIndex(IMAGE_SIZE), RowIndex(IMAGE_SIZE)
    # a scored input identical to some training image is not counted as a kept scored input
    train_rows = RowIndex(IMAGE_SIZE)
    train_rows.add(to_images(X_train).numpy())
    seen_eval.add(eval_images.numpy(), exclude=train_rows)
    predictions, stored_train, stored_eval, n_parameters = [], [], [], 0
    seen: list[int] = []
    for context, classes in enumerate(CONTEXTS):
        seen = seen + list(classes)
        mask = np.isin(y_train, classes)
        images, labels = to_images(X_train[mask]), torch.from_numpy(y_train[mask])
        learner.learn_context(context, images, labels, list(classes), list(seen))
        seen_train.add(images.numpy())
        del images, labels
        pred = as_labels(learner.predict(eval_images, list(seen)), len(eval_images))
        predictions.append(pred)
        arrays, params = reachable([learner, algorithm])
        stored_train.append(seen_train.held(arrays))
        stored_eval.append(seen_eval.held(arrays))
        n_parameters = max(n_parameters, count_parameters(params))
        del arrays, params
        line = f"context {context + 1}/{len(CONTEXTS)} {classes}: kept raw images {stored_train[-1]}"
        if args.split == "val":  # a diagnostic only; the score comes from the evaluator
            on_seen = np.isin(y[val_idx], seen)
            line += f", val accuracy on seen classes {np.mean(pred[on_seen] == y[val_idx][on_seen]):.4f}"
        print(line, flush=True)

    args.out.mkdir(parents=True, exist_ok=True)
    np.save(args.out / "predictions.npy", np.stack(predictions))
    write_json(args.out / "run_info.json", {
        "n_parameters": n_parameters,
        "stored_train_images": stored_train,
        "stored_eval_images": stored_eval,
        "contexts": [list(c) for c in CONTEXTS],
    })


if __name__ == "__main__":
    main()
