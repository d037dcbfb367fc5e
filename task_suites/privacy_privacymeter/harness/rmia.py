"""RMIA (Zarifzadeh, Liu, Shokri, 2024), offline, as ML-Privacy-Meter runs it; implemented here from the
paper because privacy-meter imports TensorFlow unconditionally.

For an audited point x with label y, Pr(x | theta) is the target's softmax probability of y. Offline,
with only reference models that did NOT train on x, Pr(x) is approximated from their mean p_out(x) as
(1 + a) / 2 * p_out(x) + (1 - a) / 2. The likelihood ratio of x is compared with that of every
population point z; the score of x is the fraction of z it beats: mean_z [LR(x) / LR(z) > gamma], gamma = 1.
The coefficient a is chosen in {0, 0.1, ..., 1} by attacking one reference model (whose training set is
known) with the others, as privacy meter's tune_offline_a does.
"""

from __future__ import annotations

import numpy as np

GAMMA = 1.0
A_GRID = np.round(np.arange(0.0, 1.01, 0.1), 1)


def scores(target_x: np.ndarray, target_z: np.ndarray, out_x: np.ndarray, out_z: np.ndarray, a: float) -> np.ndarray:
    """RMIA scores of the audited points.

    target_x (n,), target_z (m,): the target's signal on audited and population points;
    out_x (n,), out_z (m,): the mean signal of reference models that did not train on the point.
    """
    p_x = (1 + a) / 2 * out_x + (1 - a) / 2
    p_z = (1 + a) / 2 * out_z + (1 - a) / 2
    ratio_x, ratio_z = target_x / p_x, target_z / p_z
    return np.mean(ratio_x[:, None] / ratio_z[None, :] > GAMMA, axis=1)


def mean_out(signals: np.ndarray, trained_on: np.ndarray) -> np.ndarray:
    """Per point, the mean signal of the reference models (columns) that did not train on it."""
    out = ~trained_on
    if not out.any(axis=1).all():
        raise ValueError("a point is in the training set of every reference model")
    return (signals * out).sum(axis=1) / out.sum(axis=1)


def roc_curve(membership: np.ndarray, scores_: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(fpr, tpr) at every distinct score threshold, highest first, starting at (0, 0): the points of
    sklearn.metrics.roc_curve without its dropping of collinear ones (which changes neither the area nor
    the best TPR at a given FPR). Written out because importing sklearn.metrics costs a second."""
    order = np.argsort(-scores_, kind="stable")
    ranked, positive = scores_[order], membership[order].astype(np.int64)
    last_of_tie = np.r_[np.nonzero(np.diff(ranked))[0], len(ranked) - 1]
    tp, fp = np.cumsum(positive)[last_of_tie], np.cumsum(1 - positive)[last_of_tie]
    return np.r_[0.0, fp / fp[-1]], np.r_[0.0, tp / tp[-1]]


def attack_results(scores_: np.ndarray, membership: np.ndarray) -> dict[str, float]:
    """AUC and TPR at 0.1% and 0% FPR, as privacy meter's compute_attack_results."""
    fpr, tpr = roc_curve(membership, scores_)
    return {
        "AUC": float(np.trapezoid(tpr, fpr)),
        "TPR@0.1%FPR": float(tpr[np.where(fpr <= 0.001)[0][-1]]),
        "TPR@0.0%FPR": float(tpr[np.where(fpr <= 0.0)[0][-1]]),
    }


def tune_offline_a(ref_x: np.ndarray, ref_z: np.ndarray, trained_on: np.ndarray, proxy: int, helpers: list[int]) -> float:
    """The a under which reference model ``proxy`` is attacked best (highest AUC) with ``helpers``."""
    best_a, best_auc = 0.0, -1.0
    out_x = mean_out(ref_x[:, helpers], trained_on[:, helpers])
    out_z = ref_z[:, helpers].mean(axis=1)
    for a in A_GRID:
        value = attack_results(scores(ref_x[:, proxy], ref_z[:, proxy], out_x, out_z, a), trained_on[:, proxy])["AUC"]
        if value > best_auc:
            best_a, best_auc = float(a), value
    return best_a
