"""Experiment driver (protected): class-incremental learning on the 100 Glyphs-100 classes, B50 + 5 x 10,
with a memory of MEMORY_SIZE exemplars (PyCIL's protocol).

    python train.py --split val  --out OUT   learn the six sessions, predicting the val part after each
    python train.py --split test --out OUT   the same learning, predicting OUT/test_X.npy after each

train.py owns the protocol. It cuts data/ into train and val (split_config.json), hands the learner one
session at a time (that session's new classes' training images only; classes 0..49, then 50..59, ...),
and after each session asks it to label every scored input with a class seen so far. After each
session it records what the learner holds (session_audit.py): raw training images beyond the memory
budget, or any scored input, break the memory_budget constraint. Writes OUT/predictions.npy (int64,
one row per session) and OUT/run_info.json (that record).
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

NUM_CLASSES = 100
SESSIONS = [list(range(50))] + [list(range(s, s + 10)) for s in range(50, 100, 10)]
MEMORY_SIZE = 500
PIXEL_MAX = 255.0
IMAGE_SIZE = 12 * 12


def to_images(X: np.ndarray) -> torch.Tensor:
    return torch.tensor(X / PIXEL_MAX, dtype=torch.float32).reshape(-1, 1, 12, 12)


def as_labels(pred, n: int) -> np.ndarray:
    pred = pred.detach().cpu().numpy() if isinstance(pred, torch.Tensor) else np.asarray(pred)
    if pred.shape != (n,) or not np.issubdtype(pred.dtype, np.integer):
        sys.exit(f"train.py: predict() must return {n} integer labels, got shape {pred.shape} dtype {pred.dtype}")
    return pred.astype(np.int64)


def main() -> None:
    args = harness_args()
    if args.out is None:
        sys.exit("train.py: --out is required")
    # one intra-op thread: results are bit-identical run to run, and on 12x12 images more threads only cost
    torch.set_num_threads(1)
    device = "cuda" if torch.cuda.is_available() else "cpu"

    X = np.load("data/visible_X.npy")
    y = np.load("data/visible_y.npy")
    train_idx, val_idx = split_indices(len(X), load_split_config(Path.cwd()))
    train_X, train_y = X[train_idx], y[train_idx]
    eval_X = X[val_idx] if args.split == "val" else np.load(args.out / "test_X.npy")
    eval_y = y[val_idx] if args.split == "val" else None
    # from here on the data reaches the method only through the calls below
    seal([Path("data"), args.out / "test_X.npy"])
    algorithm = importlib.import_module("algorithm")

    config = algorithm.get_config()
    seed = int(config.get("seed", 0))
    torch.manual_seed(seed)
    np.random.seed(seed)
    learner = algorithm.build_learner(NUM_CLASSES, MEMORY_SIZE, config, device)

    train_images, eval_images = to_images(train_X), to_images(eval_X)
    given, scored, all_train = RowIndex(IMAGE_SIZE), RowIndex(IMAGE_SIZE), RowIndex(IMAGE_SIZE)
    all_train.add(train_images.numpy())
    scored.add(eval_images.numpy(), exclude=all_train)  # a scored input identical to a training image is not counted
    predictions, stored_train, stored_eval, n_parameters = [], [], [], 0
    seen: list[int] = []
    for session, classes in enumerate(SESSIONS):
        seen = seen + classes
        mask = np.isin(train_y, classes)
        images, labels = train_images[mask], torch.from_numpy(train_y[mask])
        learner.learn_session(session, images, labels, list(classes), list(seen))
        given.add(images.numpy())
        del images, labels
        pred = as_labels(learner.predict(eval_images, list(seen)), len(eval_images))
        predictions.append(pred)
        arrays, params = reachable([learner, algorithm])
        stored_train.append(given.held(arrays))
        stored_eval.append(scored.held(arrays))
        n_parameters = max(n_parameters, count_parameters(params))
        del arrays, params
        line = f"session {session} ({len(seen)} classes): raw training images kept {stored_train[-1]}"
        if eval_y is not None:  # a diagnostic only; the score comes from the evaluator
            on_seen = np.isin(eval_y, seen)
            line += f", val accuracy on seen classes {np.mean(pred[on_seen] == eval_y[on_seen]):.4f}"
        print(line, flush=True)

    args.out.mkdir(parents=True, exist_ok=True)
    np.save(args.out / "predictions.npy", np.stack(predictions))
    write_json(args.out / "run_info.json", {
        "n_parameters": n_parameters,
        "stored_train_images": stored_train,
        "stored_eval_images": stored_eval,
        "memory_size": MEMORY_SIZE,
        "sessions": [[s[0], s[-1]] for s in SESSIONS],
    })


if __name__ == "__main__":
    main()
