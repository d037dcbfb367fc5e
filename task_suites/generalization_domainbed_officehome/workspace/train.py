"""Experiment driver (protected): DomainBed's training loop on the OfficeHome-like digit domains.

    python train.py --split val  --out OUT   train, predict data/art_val_X.npy (Art's validation part)
    python train.py --split test --out OUT   same training, predict OUT/test_X.npy (Art's test part)

As DomainBed's scripts/train.py with test env 0 (Art): each training domain (Clipart, Product,
RealWorld) is cut into an in-split (trained on) and an out-split (its accuracy is printed as a diagnostic)
by split_config.json; each step draws one minibatch per domain (with replacement, as DomainBed's
InfiniteDataLoader), applies DomainBed's training augmentation when hparams["data_augmentation"] is true,
and calls algorithm.update; the model after the last step is the one evaluated. Both splits train the same
models, so the test run reproduces the validated one. Writes OUT/predictions.npy (int64 class labels, in the
order of the images predicted).
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from pytest_fmlbench.evalkit import harness_args, load_split_config, split_indices, write_json

import algorithms  # the editable method, next to this file

TRAIN_ENVS = (1, 2, 3)  # Clipart, Product, RealWorld; env 0 (Art) is held out
NUM_CLASSES = 10
INPUT_SHAPE = (3, 16, 16)
LOG_EVERY = 100
GRAY = torch.tensor([0.299, 0.587, 0.114]).view(1, 3, 1, 1)


def to_tensor(X: np.ndarray) -> torch.Tensor:
    return torch.tensor(X / 255.0, dtype=torch.float32)


def augment(x: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    """DomainBed's training transform, per image and vectorised: RandomResizedCrop(scale 0.7-1, ratio
    3/4-4/3), ColorJitter(0.3, 0.3, 0.3, 0.3), RandomGrayscale(0.1). DomainBed also flips horizontally;
    a mirrored digit is not the same class, so that one is left out."""
    n = len(x)

    def uniform(low: float, high: float) -> torch.Tensor:
        return low + (high - low) * torch.rand(n, generator=g)

    area = uniform(0.7, 1.0)
    ratio = torch.exp(uniform(math.log(3 / 4), math.log(4 / 3)))
    sx, sy = torch.sqrt(area * ratio).clamp(max=1.0), torch.sqrt(area / ratio).clamp(max=1.0)
    tx, ty = (1 - sx) * uniform(-1, 1), (1 - sy) * uniform(-1, 1)
    theta = torch.zeros(n, 2, 3)
    theta[:, 0, 0], theta[:, 0, 2], theta[:, 1, 1], theta[:, 1, 2] = sx, tx, sy, ty
    grid = F.affine_grid(theta, list(x.shape), align_corners=False)
    x = F.grid_sample(x, grid, mode="bilinear", padding_mode="border", align_corners=False)

    def gray(img: torch.Tensor) -> torch.Tensor:
        return (img * GRAY).sum(dim=1, keepdim=True)

    x = x * uniform(0.7, 1.3).view(n, 1, 1, 1)  # brightness
    mean = gray(x).mean(dim=(2, 3), keepdim=True)
    x = (x - mean) * uniform(0.7, 1.3).view(n, 1, 1, 1) + mean  # contrast
    x = (x - gray(x)) * uniform(0.7, 1.3).view(n, 1, 1, 1) + gray(x)  # saturation
    # hue: rotate the chroma plane of YIQ by up to 0.3 of a turn
    angle = uniform(-0.3, 0.3) * 2 * math.pi
    to_yiq = torch.tensor([[0.299, 0.587, 0.114], [0.596, -0.274, -0.322], [0.211, -0.523, 0.312]])
    yiq = torch.einsum("ij,njhw->nihw", to_yiq, x)
    cos, sin = torch.cos(angle).view(n, 1, 1), torch.sin(angle).view(n, 1, 1)
    i, q = yiq[:, 1], yiq[:, 2]
    yiq = torch.stack([yiq[:, 0], cos * i - sin * q, sin * i + cos * q], dim=1)
    x = torch.einsum("ij,njhw->nihw", torch.linalg.inv(to_yiq), yiq).clamp(0, 1)
    to_gray = (torch.rand(n, generator=g) < 0.1).view(n, 1, 1, 1)
    return torch.where(to_gray, gray(x).expand_as(x), x)


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
    train_sets, val_sets = [], []
    for e in TRAIN_ENVS:
        X, y = np.load(here / "data" / f"env{e}_X.npy"), np.load(here / "data" / f"env{e}_y.npy")
        in_idx, out_idx = split_indices(len(y), split_config)
        train_sets.append((to_tensor(X[in_idx]), torch.from_numpy(y[in_idx])))
        val_sets.append((to_tensor(X[out_idx]), torch.from_numpy(y[out_idx])))

    torch.manual_seed(seed)
    np.random.seed(seed)
    algorithm = algorithms.build_algorithm(INPUT_SHAPE, NUM_CLASSES, len(TRAIN_ENVS), hparams).to(device)
    algorithm.train()
    sampler = torch.Generator().manual_seed(seed)
    augmenter = torch.Generator().manual_seed(seed + 1)
    started, history = time.perf_counter(), []
    for step in range(hparams["steps"]):
        minibatches = []
        for X, y in train_sets:
            idx = torch.randint(len(y), (hparams["batch_size"],), generator=sampler)
            x = augment(X[idx], augmenter) if hparams.get("data_augmentation", True) else X[idx]
            minibatches.append((x.to(device), y[idx].to(device)))
        history.append(algorithm.update(minibatches, None))
        if (step + 1) % LOG_EVERY == 0 or step + 1 == hparams["steps"]:
            recent = history[-LOG_EVERY:]
            keys = sorted({k for h in recent for k in h})
            stats = ", ".join(f"{k} {np.mean([h[k] for h in recent if k in h]):.4f}" for k in keys)
            print(f"step {step + 1}/{hparams['steps']}: {stats}", flush=True)

    # a diagnostic only (the score is Art's): accuracy on the training domains' out-splits
    accs = [float(np.mean(predict(algorithm, X, device) == y.numpy())) for X, y in val_sets]
    print("training-domain validation (diagnostic): " + ", ".join(
        f"env{e}_out_acc {a:.4f}" for e, a in zip(TRAIN_ENVS, accs)))
    images = here / "data" / "art_val_X.npy" if args.split == "val" else args.out / "test_X.npy"
    predictions = predict(algorithm, to_tensor(np.load(images)), device)
    args.out.mkdir(parents=True, exist_ok=True)
    np.save(args.out / "predictions.npy", predictions)
    write_json(args.out / "run_info.json", {"steps": hparams["steps"], "train_seconds": time.perf_counter() - started,
                                            "device": device})


if __name__ == "__main__":
    main()
