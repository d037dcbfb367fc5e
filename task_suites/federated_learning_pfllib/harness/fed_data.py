"""The federated digits: 20 clients with Dirichlet(0.1) label skew, each client's data cut into a
visible part and a hidden test part. Shared by prepare.py and evaluate.py.

The seeds live only here (harness/ is never copied into the workspace), so nothing the agent edits can
move an example between a client's visible pool and its hidden test split. The partition follows
PFLlib's `separate_data(partition="dir")`: class by class, Dirichlet(alpha) proportions over the
clients (a client already holding its fair share gets no more), redrawn until every client holds at
least `LEAST_SAMPLES`; then each client keeps `TRAIN_RATIO` of its examples and the rest is its test
split (PFLlib's `split_data`). numpy's legacy RandomState is used because its streams are frozen, so
the partition is the same on every numpy version.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sklearn.datasets import load_digits

from pytest_fmlbench.evalkit import SplitConfig, split_indices

NUM_CLIENTS = 20
NUM_CLASSES = 10
ALPHA = 0.1
TRAIN_RATIO = 0.75  # PFLlib's default share of each client's data used for training
# PFLlib: min(batch_size / (1 - train_ratio), len(data) / num_clients / 2) with batch_size 10
LEAST_SAMPLES = 40
PARTITION_SEED = 1
TEST_SEED = 20250917
MAX_DRAWS = 10_000


@dataclass(frozen=True)
class FederatedDigits:
    visible_X: np.ndarray  # uint8 (N, 64), pixel intensities 0..16
    visible_y: np.ndarray  # int64 (N,)
    visible_client: np.ndarray  # int64 (N,), the client holding each example
    test_X: np.ndarray
    test_y: np.ndarray
    test_client: np.ndarray


def dirichlet_partition(y: np.ndarray, rng: np.random.RandomState) -> list[np.ndarray]:
    """Indices of y held by each client (PFLlib's 'dir' partition)."""
    fair_share = len(y) / NUM_CLIENTS
    for _ in range(MAX_DRAWS):
        held: list[list[int]] = [[] for _ in range(NUM_CLIENTS)]
        for k in range(NUM_CLASSES):
            idx_k = np.flatnonzero(y == k)
            rng.shuffle(idx_k)
            p = rng.dirichlet(np.repeat(ALPHA, NUM_CLIENTS))
            p = np.array([pj * (len(h) < fair_share) for pj, h in zip(p, held)])
            cuts = (np.cumsum(p / p.sum()) * len(idx_k)).astype(int)[:-1]
            for h, part in zip(held, np.split(idx_k, cuts)):
                h.extend(part.tolist())
        if min(len(h) for h in held) >= LEAST_SAMPLES:
            return [np.sort(np.array(h, dtype=np.int64)) for h in held]
    raise RuntimeError(f"no Dirichlet partition with >= {LEAST_SAMPLES} examples per client in {MAX_DRAWS} draws")


def load() -> FederatedDigits:
    """The task's data; a 'full' profile would replace this function (CIFAR-10, PFLlib's generator)."""
    digits = load_digits()
    X = digits.data.astype(np.uint8)
    y = digits.target.astype(np.int64)
    clients = dirichlet_partition(y, np.random.RandomState(PARTITION_SEED))
    carve = np.random.RandomState(TEST_SEED)
    visible, test = [], []
    for c, idx in enumerate(clients):
        idx = carve.permutation(idx)
        n_test = int(round((1 - TRAIN_RATIO) * len(idx)))
        test.append((np.sort(idx[:n_test]), c))
        visible.append((np.sort(idx[n_test:]), c))

    def stack(parts):
        idx = np.concatenate([i for i, _ in parts])
        owner = np.concatenate([np.full(len(i), c, dtype=np.int64) for i, c in parts])
        return X[idx], y[idx], owner

    return FederatedDigits(*stack(visible), *stack(test))


def client_split(visible_client: np.ndarray, split_config: SplitConfig) -> tuple[np.ndarray, np.ndarray]:
    """(train, val) indices into the visible pool: each client's own examples cut by split_config."""
    train, val = [], []
    for c in range(NUM_CLIENTS):
        mine = np.flatnonzero(visible_client == c)
        tr, va = split_indices(len(mine), split_config)
        train.append(mine[tr])
        val.append(mine[va])
    return np.concatenate(train), np.concatenate(val)
