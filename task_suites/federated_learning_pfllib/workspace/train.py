"""Experiment driver (protected): a federation of 20 simulated clients, one process, plain torch.

    python train.py --split val  --out OUT   federated training, then the global model predicts every
                                             client's val examples
    python train.py --split test --out OUT   the same training, then it predicts OUT/test_X.npy (every
                                             client's hidden test examples)

train.py owns the protocol: the clients and their data (the Dirichlet(0.1) partition is fixed), the
number of clients, the rounds, which clients join each round, and the final predictions, made by the
server's global model alone. The method (algorithm.py) decides what clients do locally, what they send
and how the server combines it. Writes OUT/predictions.npy (int64 labels, one per scored example, in
client order).
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import TensorDataset

from data_guard import seal
from pytest_fmlbench.evalkit import SplitConfig, harness_args, load_split_config, split_indices

NUM_CLIENTS = 20  # fixed by the partition in data/
NUM_CLASSES = 10
PIXEL_MAX = 16.0  # digits pixels are integers 0..16: a public bound


def to_images(X: np.ndarray) -> torch.Tensor:
    return torch.tensor(X / PIXEL_MAX, dtype=torch.float32).reshape(-1, 1, 8, 8)


def client_split(visible_client: np.ndarray, config: SplitConfig) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per client, (train, val) indices into the visible pool: the client's own examples cut by config.
    The evaluator recomputes the same cut, so predictions are scored on exactly these val examples."""
    train, val = [], []
    for c in range(NUM_CLIENTS):
        mine = np.flatnonzero(visible_client == c)
        tr, va = split_indices(len(mine), config)
        train.append(mine[tr])
        val.append(mine[va])
    return train, val


def check_config(config: dict) -> dict:
    for key in ("global_rounds", "local_epochs", "lr", "batch_size", "join_ratio"):
        if key not in config:
            sys.exit(f"train.py: get_fl_config() has no {key!r}")
    if "num_clients" in config and config["num_clients"] != NUM_CLIENTS:
        sys.exit(f"train.py: the federation has {NUM_CLIENTS} clients (fixed by the data partition), "
                 f"the config asks for {config['num_clients']}")
    rounds = int(config["global_rounds"])
    join_ratio = float(config["join_ratio"])
    if rounds < 1 or not 0 < join_ratio <= 1:
        sys.exit("train.py: global_rounds must be >= 1 and join_ratio in (0, 1]")
    return {**config, "global_rounds": rounds, "join_ratio": join_ratio, "seed": int(config.get("seed", 0))}


def select_clients(server, rnd: int, join_ratio: float, rng: np.random.RandomState) -> list[int]:
    if hasattr(server, "select_clients"):
        chosen = [int(c) for c in server.select_clients(rnd, NUM_CLIENTS, join_ratio, rng)]
        if not chosen or len(set(chosen)) != len(chosen) or not all(0 <= c < NUM_CLIENTS for c in chosen):
            sys.exit(f"train.py: select_clients returned {chosen!r}: expected distinct ids in 0..{NUM_CLIENTS - 1}")
        return chosen
    n_selected = max(1, int(NUM_CLIENTS * join_ratio))
    return [int(c) for c in rng.choice(NUM_CLIENTS, n_selected, replace=False)]


def predict(model: torch.nn.Module, X: torch.Tensor, device: str) -> np.ndarray:
    model.eval()
    with torch.no_grad():
        logits = torch.cat([model(chunk.to(device)).cpu() for chunk in X.split(512)])
    return logits.argmax(dim=1).numpy().astype(np.int64)


def main() -> None:
    args = harness_args()
    if args.out is None:
        sys.exit("train.py: --out is required")
    # one intra-op thread: results are bit-identical run to run, and on tiny batches more threads only cost
    torch.set_num_threads(1)
    device = "cuda" if torch.cuda.is_available() else "cpu"

    X = np.load("data/visible_X.npy")
    y = np.load("data/visible_y.npy")
    owner = np.load("data/visible_client.npy")
    train_idx, val_idx = client_split(owner, load_split_config(Path.cwd()))
    if args.split == "val":
        eval_X = X[np.concatenate(val_idx)]
    else:
        eval_X = np.load(args.out / "test_X.npy")
    # from here on the data reaches the method only through its FLClient
    seal([Path("data"), args.out / "test_X.npy", args.out / "test_client.npy"])
    algorithm = importlib.import_module("algorithm")

    config = check_config(algorithm.get_fl_config())
    torch.manual_seed(config["seed"])
    np.random.seed(config["seed"])
    rng = np.random.RandomState(config["seed"])

    server = algorithm.FLServer(device=device)
    clients = [algorithm.FLClient(c, TensorDataset(to_images(X[idx]), torch.from_numpy(y[idx])), device=device)
               for c, idx in enumerate(train_idx)]
    print(f"{NUM_CLIENTS} clients, train sizes {[len(i) for i in train_idx]}; "
          f"{config['global_rounds']} rounds, join_ratio {config['join_ratio']}")
    for rnd in range(config["global_rounds"]):
        global_state = server.get_global_state()
        states, weights = [], []
        for c in select_clients(server, rnd, config["join_ratio"], rng):
            clients[c].set_model(global_state)
            state, weight = clients[c].local_train()
            states.append(state)
            weights.append(weight)
        server.aggregate(states, weights)

    predictions = predict(server.global_model, to_images(eval_X), device)
    args.out.mkdir(parents=True, exist_ok=True)
    np.save(args.out / "predictions.npy", predictions)
    if args.split == "val":  # a diagnostic only; the score comes from the evaluator
        ends = np.cumsum([len(v) for v in val_idx])
        accs = [np.mean(predictions[end - len(v):end] == y[v]) for v, end in zip(val_idx, ends) if len(v)]
        print(f"val accuracy averaged over clients (diagnostic) {np.mean(accs):.4f}")


if __name__ == "__main__":
    main()
