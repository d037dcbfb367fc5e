"""Offline RMIA (Zarifzadeh, Liu, Shokri, 2024) exactly as privacy meter runs it at the pinned commit
(attacks.py's run_rmia, get_rmia_out_signals and tune_offline_a, audit.py's compute_attack_results),
written out here so that the audit never imports code from the data cache at smoke scale, where a
stand-in replaces privacy meter. Checked against attacks.py at e384af8 on random signals: the same scores,
offline a and AUC.

Signals are the models' softmax probabilities of the true label, one column per model; models come in
complementary pairs (columns 2i and 2i + 1). Attacking model t, the reference models are the columns
other than t and its pair, the first 2 * num_reference_models of them; per point the largest of their
signals among those that did not train on it (num_reference_models of them) approximate Pr(x | OUT).
Pr(x) = (1 + a) / 2 * mean OUT signal + (1 - a) / 2; the score of x is the share of population points z
with [Pr(x | target) / Pr(x)] / [Pr(z | target) / Pr(z)] > 1. The coefficient a is the one in
{0, 0.1, ..., 1} under which t's pair is attacked best (highest AUC) with one reference model.
"""

from __future__ import annotations

import numpy as np
from sklearn.metrics import auc, roc_curve

GAMMA = 1.0
ROWS_PER_CHUNK = 1024  # score this many audited points at a time: (rows x population) ratios in memory


def paired(model: int) -> int:
    return model + 1 if model % 2 == 0 else model - 1


def out_signals(signals: np.ndarray, trained_on: np.ndarray, target: int, num_reference_models: int) -> np.ndarray:
    columns = [c for c in range(signals.shape[1]) if c not in (target, paired(target))][: 2 * num_reference_models]
    kept = signals[:, columns] * ~trained_on[:, columns]
    return -np.sort(-kept, axis=1)[:, :num_reference_models]


def run_rmia(target: int, signals: np.ndarray, population: np.ndarray, trained_on: np.ndarray,
             num_reference_models: int, offline_a: float) -> np.ndarray:
    """The RMIA score of every audited point (higher: more likely a member of ``target``'s training set)."""
    mean_x = (1 + offline_a) / 2 * np.mean(out_signals(signals, trained_on, target, num_reference_models), axis=1) \
        + (1 - offline_a) / 2
    ratio_x = signals[:, target].ravel() / mean_x
    nobody = np.zeros_like(population).astype(bool)  # population points are outside every model
    mean_z = (1 + offline_a) / 2 * np.mean(out_signals(population, nobody, target, num_reference_models), axis=1) \
        + (1 - offline_a) / 2
    ratio_z = population[:, target].ravel() / mean_z
    return np.concatenate([np.average(ratio_x[start:start + ROWS_PER_CHUNK, None] / ratio_z > GAMMA, axis=1)
                           for start in range(0, len(ratio_x), ROWS_PER_CHUNK)])


def tune_offline_a(target: int, signals: np.ndarray, population: np.ndarray, trained_on: np.ndarray) -> np.float64:
    """The coefficient a, a NumPy float64 as privacy meter's (a Python float would keep float32 signals in float32)."""
    pair = paired(target)
    best_a, best_auc = np.float64(0.0), 0.0
    for a in np.arange(0, 1.1, 0.1):
        scores = run_rmia(pair, signals, population, trained_on, 1, a)
        fpr, tpr, _ = roc_curve(trained_on[:, pair].ravel(), scores.ravel())
        value = auc(fpr, tpr)
        if value > best_auc:
            best_a, best_auc = a, value
    return best_a


def attack_results(scores: np.ndarray, membership: np.ndarray) -> dict[str, float]:
    """AUC and the TPR at 0.1% and at 0% FPR of the attack."""
    fpr, tpr, _ = roc_curve(membership.ravel(), scores.ravel())
    return {"AUC": float(auc(fpr, tpr)),
            "TPR@0.1%FPR": float(tpr[np.where(fpr <= 0.001)[0][-1]]),
            "TPR@0.0%FPR": float(tpr[np.where(fpr <= 0.0)[0][-1]])}
