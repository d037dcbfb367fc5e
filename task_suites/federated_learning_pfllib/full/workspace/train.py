"""Experiment driver (protected): FML-bench's Federated_Learning_PFLlib loop, 20 simulated clients in one process.

    python train.py --split val  --out OUT   federated training on each client's train cut of its visible pool,
                                             save model_checkpoint/global_model.pt, label every client's val cut
    python train.py --split test --out OUT   load model_checkpoint/global_model.pt into a fresh FLServer (no
                                             training) and label OUT/test_images.npy

As the original's script: seeds 42 (torch, NumPy), the configuration from algorithm.get_fl_config() (20 clients,
fixed by the partition), each client's visible pool cut by split_config.json (RandomState(val_seed), the first
int(val_ratio * n) for val), one FLClient per client and an FLServer; each round np.random.choice picks
max(1, int(20 * join_ratio)) clients, each gets the global state (set_model), trains (local_train) and returns
its state and weight, and the server aggregates; every 10 rounds and after the last, server.evaluate on the val
cuts is printed. What is scored is the global model's top-1 label (in eval mode, as the baseline's evaluate
computes its accuracy) of each scored image: OUT/predictions.npy, client after client; the evaluator, which holds
the test labels, scores each client. --scale smoke runs 2 rounds, for checking the code path on fixture data.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import TensorDataset

from pytest_fmlbench.evalkit import harness_args, load_split_config, original_split_indices

from algorithm import FLClient, FLServer, get_fl_config  # noqa: E402  (the editable method, next to this file)

NUM_CLIENTS = 20  # fixed by PFLlib's partition in data/
SEED = 42
SMOKE_ROUNDS = 2
EVAL_EVERY = 10
SCORE_BATCH = 64  # the baseline's evaluate batch
DATA, CHECKPOINT = Path("data"), Path("model_checkpoint") / "global_model.pt"


def images(pixels: np.ndarray) -> torch.Tensor:
    """uint8 (n, 3, 32, 32) as PFLlib's generator stored them: ToTensor, then Normalize((0.5,) * 3, (0.5,) * 3)."""
    return torch.from_numpy(pixels).float().div(255).sub(0.5).div(0.5)


def client_datasets() -> tuple[list[TensorDataset], list[TensorDataset]]:
    """Per client, its visible pool cut into (train, val) by split_config.json, as the original's split_dataset."""
    pixels, labels = np.load(DATA / "visible_images.npy"), np.load(DATA / "visible_labels.npy")
    owners = np.load(DATA / "visible_client.npy")
    config = load_split_config(Path.cwd())
    print(f"split_config: val_ratio={config.val_ratio}, val_seed={config.val_seed}", flush=True)
    train, val = [], []
    for client in range(NUM_CLIENTS):
        mine = np.flatnonzero(owners == client)
        train_pos, val_pos = original_split_indices(len(mine), config)
        for part, positions in ((train, mine[train_pos]), (val, mine[val_pos])):
            part.append(TensorDataset(images(pixels[positions]), torch.from_numpy(labels[positions])))
        print(f"  Client {client}: train={len(train[-1])}, val={len(val[-1])}", flush=True)
    return train, val


def train(config: dict, device: torch.device, train_data: list, val_data: list, rounds: int) -> FLServer:
    server = FLServer(device=device)
    clients = [FLClient(client, train_data[client], device=device) for client in range(NUM_CLIENTS)]
    print(f"Starting federated training: {rounds} rounds, {NUM_CLIENTS} clients, "
          f"{config['local_epochs']} local epochs", flush=True)
    for rnd in range(rounds):
        selected = np.random.choice(NUM_CLIENTS, max(1, int(NUM_CLIENTS * config["join_ratio"])), replace=False)
        global_state = server.get_global_state()
        states, weights = [], []
        for client in selected:
            clients[client].set_model(global_state)
            state, weight = clients[client].local_train()
            states.append(state)
            weights.append(weight)
        server.aggregate(states, weights)
        if rnd % EVAL_EVERY == 0 or rnd == rounds - 1:
            accuracies = server.evaluate(val_data)
            print(f"  Round {rnd}: avg_acc={np.mean(accuracies):.4f}, std={np.std(accuracies):.4f}", flush=True)
    return server


def label(server: FLServer, batches: list[torch.Tensor], device: torch.device) -> np.ndarray:
    """The global model's top-1 label of every image, in eval mode."""
    model = server.global_model
    model.eval()
    predictions = []
    with torch.no_grad():
        for x in batches:
            for chunk in x.split(SCORE_BATCH):
                predictions.append(model(chunk.to(device)).argmax(1).cpu().numpy())
    return np.concatenate(predictions).astype(np.int64) if predictions else np.zeros(0, dtype=np.int64)


def main() -> None:
    run = harness_args()
    if run.out is None:
        sys.exit("train.py: --out is required")
    torch.manual_seed(SEED)
    torch.cuda.manual_seed_all(SEED)
    np.random.seed(SEED)
    if run.scale == "smoke":
        torch.set_num_threads(1)  # so small a network gains nothing from a second thread, which spins on a busy CPU
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    config = get_fl_config()
    if config.get("num_clients") != NUM_CLIENTS:
        sys.exit(f"train.py: num_clients must be {NUM_CLIENTS} (fixed by the data partition), "
                 f"get_fl_config() says {config.get('num_clients')}")
    run.out.mkdir(parents=True, exist_ok=True)

    if run.split == "val":
        train_data, val_data = client_datasets()
        rounds = min(SMOKE_ROUNDS, config["global_rounds"]) if run.scale == "smoke" else config["global_rounds"]
        server = train(config, device, train_data, val_data, rounds)
        CHECKPOINT.parent.mkdir(exist_ok=True)
        torch.save(server.global_model.state_dict(), CHECKPOINT)
        print(f"Saved checkpoint to {CHECKPOINT}", flush=True)
        scored = [data.tensors[0] for data in val_data]
    else:
        if not CHECKPOINT.is_file():
            sys.exit(f"train.py: no {CHECKPOINT}: the test run needs the val run's trained model")
        server = FLServer(device=device)
        server.global_model.load_state_dict(torch.load(CHECKPOINT, map_location=device, weights_only=True))
        scored = [images(np.load(run.out / "test_images.npy"))]
    predictions = label(server, scored, device)
    np.save(run.out / "predictions.npy", predictions)
    print(f"{len(predictions)} {run.split} images labelled", flush=True)


if __name__ == "__main__":
    main()
