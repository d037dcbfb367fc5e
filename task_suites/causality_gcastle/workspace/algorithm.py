"""Causal structure learning method (EDITABLE).

Baseline: gCastle's linear NOTEARS (Zheng et al., 2018) followed by hard thresholding of the
learned weight matrix. The data come from a *nonlinear* (MLP) structural equation model, so the
linear model is deliberately mismatched: there is room for nonlinear scores, better thresholding,
ordering-based methods, ensembling, ...

Interface that train.py relies on (keep it):
    learn_structure(X: np.ndarray, config: dict) -> np.ndarray
X is the (n_samples, n_nodes) observational data matrix; the return value is a binary
(n_nodes, n_nodes) adjacency matrix with A[i, j] = 1 meaning the edge i -> j. It must be a DAG
(no self-loops, no cycles, so no i <-> j pairs) or the step fails the evaluator's "dag" constraint.
"""

from __future__ import annotations

import networkx as nx
import numpy as np
from castle.algorithms import Notears


def _prune_to_dag(weights: np.ndarray, threshold: float) -> np.ndarray:
    """Threshold |W| and, if a cycle survives, drop the weakest edges until the graph is acyclic.

    NOTEARS only drives the acyclicity penalty to ~h_tol, so tiny cycles can survive a low
    threshold; removing the smallest weights first is the repair used in the NOTEARS reference code.
    """
    w = np.abs(np.asarray(weights, dtype=float))
    np.fill_diagonal(w, 0.0)
    w[w <= threshold] = 0.0
    while not nx.is_directed_acyclic_graph(nx.DiGraph(w)):
        nonzero = np.flatnonzero(w)
        w.flat[nonzero[np.argmin(w.flat[nonzero])]] = 0.0
    return (w > 0).astype(np.int8)


def learn_structure(X: np.ndarray, config: dict) -> np.ndarray:
    X = np.asarray(X, dtype=float)
    if config.get("standardize", False):
        # Unit variances remove the "variance grows along the causal order" signal NOTEARS
        # otherwise exploits; exposed as a knob because it can help or hurt.
        X = (X - X.mean(axis=0)) / X.std(axis=0)
    model = Notears(
        lambda1=float(config["lambda1"]),
        loss_type=str(config["loss_type"]),
        max_iter=int(config["max_iter"]),
        h_tol=float(config["h_tol"]),
        rho_max=float(config["rho_max"]),
        w_threshold=float(config["w_threshold"]),
    )
    model.learn(X)
    return _prune_to_dag(np.asarray(model.weight_causal_matrix), float(config["w_threshold"]))
