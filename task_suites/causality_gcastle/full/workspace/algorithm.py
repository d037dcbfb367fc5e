"""Causal structure learning (EDITABLE): FML-bench's Causality_gcastle baseline.

gCastle's linear NOTEARS (least-squares score, L1 penalty, augmented-Lagrangian acyclicity constraint) with
its default settings, then |W| > 0.3 as edges. The data come from nonlinear (MLP) structural equations, so the
linear model is deliberately mismatched.

Interface train.py relies on (keep it):
    run_causal_discovery(X, true_dag=None) -> np.ndarray
X: (n_samples, n_nodes) observations. Returns a binary (n_nodes, n_nodes) adjacency matrix, A[i, j] = 1 for
the edge i -> j, which must be a DAG. true_dag is the original's signature: train.py always passes None.
"""

import numpy as np

THRESHOLD = 0.3


def run_causal_discovery(X, true_dag=None):
    from castle.algorithms import Notears

    model = Notears()
    model.learn(X)
    weights = np.asarray(model.causal_matrix, dtype=float)
    estimate = (np.abs(weights) > THRESHOLD).astype(int)
    np.fill_diagonal(estimate, 0)
    return estimate
