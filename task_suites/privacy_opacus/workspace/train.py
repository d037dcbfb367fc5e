"""Experiment driver (protected): DP-SGD with Opacus on the digits data.

    python train.py --split val  --out OUT   train on the train part of data/, predict the val part
    python train.py --split test --out OUT   same training, predict OUT/test_X.npy (hidden test inputs)

Both splits train the same model on the same examples (the train part chosen by split_config.json),
so the test run reproduces the validated model. Writes OUT/predictions.npy (int64 class labels) and
OUT/dp_config.json (the DP-SGD parameters actually used, from which the evaluator recomputes epsilon).
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
from opacus import PrivacyEngine
from torch.utils.data import DataLoader, TensorDataset

from pytest_fmlbench.evalkit import harness_args, load_split_config, split_indices, write_json

import algorithm  # the editable method, next to this file

# The privacy budget belongs to the benchmark, not to the method: algorithm.py cannot change it.
TARGET_EPSILON = 8.0
TARGET_DELTA = 1e-5
NUM_CLASSES = 10
PIXEL_MAX = 16.0  # digits pixels are integers 0..16: a public bound, so scaling by it leaks nothing

# Expected warnings that only add noise to the log: Opacus's secure-RNG notice and RDP order-grid hint,
# and torch's note that the first layer's backward hook fires although the inputs need no gradient.
warnings.filterwarnings("ignore", message=".*[Ss]ecure RNG.*")
warnings.filterwarnings("ignore", message=".*Optimal order is the (largest|smallest) alpha.*")
warnings.filterwarnings("ignore", message=".*Full backward hook is firing.*")


def to_images(X: np.ndarray) -> torch.Tensor:
    return torch.tensor(X / PIXEL_MAX, dtype=torch.float32).reshape(-1, 1, 8, 8)


def check_config(config: dict) -> dict:
    """Fail early, with a readable message, on hyper-parameters DP-SGD cannot run with."""
    for key in ("lr", "epochs", "batch_size", "max_grad_norm"):
        if key not in config:
            sys.exit(f"train.py: get_training_config() has no {key!r}")
    for key in ("target_epsilon", "target_delta"):
        if key in config:
            print(f"train.py: ignoring {key}={config[key]} from the config; the budget is fixed "
                  f"at epsilon={TARGET_EPSILON}, delta={TARGET_DELTA}", file=sys.stderr)
    epochs, batch_size = int(config["epochs"]), int(config["batch_size"])
    if epochs < 1 or batch_size < 1 or not float(config["max_grad_norm"]) > 0:
        sys.exit("train.py: epochs and batch_size must be >= 1 and max_grad_norm > 0")
    return {**config, "epochs": epochs, "batch_size": batch_size, "seed": int(config.get("seed", 0))}


def predict(model: nn.Module, X: torch.Tensor, device: str) -> np.ndarray:
    model.eval()
    with torch.no_grad():
        logits = torch.cat([model(chunk.to(device)).cpu() for chunk in X.split(512)])
    return logits.argmax(dim=1).numpy().astype(np.int64)


def main() -> None:
    args = harness_args()
    if args.out is None:
        sys.exit("train.py: --out is required")
    # One intra-op thread whatever OMP_NUM_THREADS says: on 8x8 images extra threads buy nothing, and on
    # a busy 2-core box spinning OpenMP workers made the same run 5x slower (results are identical).
    torch.set_num_threads(1)
    device = "cuda" if torch.cuda.is_available() else "cpu"

    config = check_config(algorithm.get_training_config())
    X = np.load("data/visible_X.npy")
    y = np.load("data/visible_y.npy")
    train_idx, val_idx = split_indices(len(X), load_split_config(Path.cwd()))
    eval_X = X[val_idx] if args.split == "val" else np.load(args.out / "test_X.npy")

    torch.manual_seed(config["seed"])
    np.random.seed(config["seed"])
    model = algorithm.get_model(NUM_CLASSES).to(device)
    if hasattr(algorithm, "get_optimizer"):
        optimizer = algorithm.get_optimizer(model.parameters(), config)
    else:
        optimizer = torch.optim.SGD(model.parameters(), lr=config["lr"], momentum=config.get("momentum", 0.0))

    train_set = TensorDataset(to_images(X[train_idx]), torch.from_numpy(y[train_idx]))
    loader = DataLoader(train_set, batch_size=config["batch_size"],
                        generator=torch.Generator().manual_seed(config["seed"]))
    # Opacus calibrates the noise for int(epochs / sample_rate) steps with sample_rate = 1/len(loader);
    # the Poisson loader's length can round up by one step, so cap the run at exactly what was planned.
    planned_steps = int(config["epochs"] / (1 / len(loader)))

    # RDP is the accountant the evaluator re-runs; calibrating with another (PRV) could overshoot it.
    engine = PrivacyEngine(accountant="rdp")
    noise_generator = torch.Generator(device=device).manual_seed(config["seed"] + 1)
    model, optimizer, loader = engine.make_private_with_epsilon(
        module=model, optimizer=optimizer, data_loader=loader, epochs=config["epochs"],
        target_epsilon=TARGET_EPSILON, target_delta=TARGET_DELTA,
        max_grad_norm=float(config["max_grad_norm"]), poisson_sampling=True, noise_generator=noise_generator,
    )
    criterion = nn.CrossEntropyLoss()

    steps = 0
    for epoch in range(config["epochs"]):
        model.train()
        total_loss, seen = 0.0, 0
        for xb, yb in loader:
            if steps == planned_steps:
                break
            xb, yb = xb.to(device), yb.to(device)
            optimizer.zero_grad()
            loss = criterion(model(xb), yb)
            loss.backward()
            optimizer.step()
            steps += 1
            total_loss += loss.item() * len(yb)
            seen += len(yb)
        # epsilon is printed once at the end: each RDP evaluation costs about half a second
        print(f"epoch {epoch + 1}/{config['epochs']}: loss {total_loss / max(seen, 1):.4f}")

    predictions = predict(model, to_images(eval_X), device)
    args.out.mkdir(parents=True, exist_ok=True)
    np.save(args.out / "predictions.npy", predictions)

    history = engine.accountant.history  # [(noise_multiplier, sample_rate, steps)], merged when unchanged
    if len(history) != 1:
        sys.exit(f"train.py: expected one constant DP-SGD phase, the accountant recorded {history}")
    noise_multiplier, sample_rate, accounted_steps = history[0]
    epsilon = engine.get_epsilon(TARGET_DELTA)
    write_json(args.out / "dp_config.json", {
        "accountant": "rdp",
        "noise_multiplier": float(noise_multiplier),
        "sample_rate": float(sample_rate),
        "steps": int(accounted_steps),
        "epochs": config["epochs"],
        "batch_size": config["batch_size"],
        "n_train": len(train_idx),
        "max_grad_norm": float(config["max_grad_norm"]),
        "delta": TARGET_DELTA,
        "target_epsilon": TARGET_EPSILON,
        "poisson_sampling": True,
        # for the log only: the evaluator recomputes epsilon from the fields above
        "epsilon_reported": float(epsilon),
    })
    print(f"noise_multiplier {noise_multiplier:.4f}, sample_rate {sample_rate:.4f}, steps {accounted_steps}, "
          f"n_train {len(train_idx)}, epsilon {epsilon:.4f} (delta {TARGET_DELTA})")
    if args.split == "val":  # a diagnostic only; the score comes from the evaluator
        print(f"val accuracy (diagnostic) {np.mean(predictions == y[val_idx]):.4f}")


if __name__ == "__main__":
    main()
