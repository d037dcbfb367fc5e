"""FML-bench's Causality_gcastle data and scores: a random DAG, nonlinear (MLP) structural equations, and the
original's edge metrics.

The original draws everything from ``numpy.random.RandomState`` seeds in its own script (not with gCastle's
simulator), so the same seeds give the same graph and samples here, draw for draw:

- the DAG: a random order of the nodes, then ``n_edges`` of the forward pairs (earlier -> later in that order)
  chosen without replacement;
- the samples: nodes in Kahn's topological order (a FIFO queue seeded with the parentless nodes in index order,
  children released in index order); each node draws its noise N(0, 0.5^2) first, then, if it has parents, a
  one-hidden-layer tanh network (hidden width max(4, parents), weights N(0, 0.8^2), biases N(0, 0.3^2)).

The score (``edge_scores``) is the original's: SHD counts every true edge the estimate lacks (a reversed edge
once) and every estimated edge whose pair holds no true edge in either direction; precision, recall (TPR), F1
and FDR are over directed edges.
"""

from __future__ import annotations

from collections import deque

import numpy as np

NOISE_SCALE, WEIGHT_SCALE, BIAS_SCALE, MIN_HIDDEN = 0.5, 0.8, 0.3, 4


def random_dag(n_nodes: int, n_edges: int, seed: int) -> np.ndarray:
    """An (n_nodes, n_nodes) int adjacency matrix, ``A[i, j] = 1`` for the edge i -> j."""
    rng = np.random.RandomState(seed)
    order = rng.permutation(n_nodes)
    forward = [(order[a], order[b]) for a in range(n_nodes) for b in range(a + 1, n_nodes)]
    chosen = rng.choice(len(forward), size=min(n_edges, len(forward)), replace=False)
    dag = np.zeros((n_nodes, n_nodes), dtype=int)
    for k in chosen:
        dag[forward[k]] = 1
    return dag


def topological_order(dag: np.ndarray) -> list[int]:
    """Kahn's order with a FIFO queue, ties broken by node index (the order the samples are drawn in)."""
    remaining = dag.sum(axis=0)
    ready = deque(int(v) for v in np.flatnonzero(remaining == 0))
    order = []
    while ready:
        node = ready.popleft()
        order.append(node)
        for child in np.flatnonzero(dag[node]):
            remaining[child] -= 1
            if remaining[child] == 0:
                ready.append(int(child))
    if len(order) != len(dag):
        raise ValueError("the graph has a cycle")
    return order


def sample(dag: np.ndarray, n_samples: int, seed: int) -> np.ndarray:
    """(n_samples, n_nodes) observations of the MLP structural equation model on ``dag``."""
    rng = np.random.RandomState(seed)
    X = np.zeros((n_samples, len(dag)))
    for node in topological_order(dag):
        parents = np.flatnonzero(dag[:, node])
        noise = rng.randn(n_samples) * NOISE_SCALE
        if len(parents) == 0:
            X[:, node] = noise
            continue
        hidden = max(MIN_HIDDEN, len(parents))
        w_in = rng.randn(len(parents), hidden) * WEIGHT_SCALE
        bias = rng.randn(hidden) * BIAS_SCALE
        w_out = rng.randn(hidden, 1) * WEIGHT_SCALE
        X[:, node] = (np.tanh(X[:, parents] @ w_in + bias) @ w_out).ravel() + noise
    return X


def edge_scores(truth: np.ndarray, estimate: np.ndarray) -> dict[str, float]:
    """SHD, F1, FDR, TPR (recall), precision and edge counts of a binary ``estimate`` against ``truth``."""
    truth, estimate = truth.astype(bool), estimate.astype(bool)
    missing = truth & ~estimate
    # an extra edge costs nothing where the pair holds a true edge the other way: that edge is already missing
    extra = estimate & ~truth & ~truth.T
    tp, fp, fn = int((truth & estimate).sum()), int((estimate & ~truth).sum()), int(missing.sum())
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    return {
        "shd": float(missing.sum() + extra.sum()),
        "f1": 2 * precision * recall / (precision + recall) if precision + recall else 0.0,
        "fdr": fp / (tp + fp) if tp + fp else 0.0,
        "tpr": recall,
        "precision": precision,
        "n_true_edges": int(truth.sum()),
        "n_est_edges": int(estimate.sum()),
    }
