"""A hand-written better method for the signal table: logistic regression, then one decision threshold
per sex, chosen to cancel the average odds difference within the accuracy floor (post-processing for
equalised odds, Hardt, Price & Srebro, 2016, with deterministic thresholds).

The average odds difference is the mean of the FPR and TPR gaps between the groups, so a threshold per
group can drive it to zero; the search takes, among all pairs of per-group selection rates, the pair
with the smallest |AOD| on out-of-fold training scores whose accuracy is at least ``accuracy_target``
(or, if no pair reaches it, within ``accuracy_slack`` of the most accurate pair).
On the task's version 2, accuracy_target 0.65 (config.json) is the one of 0.64 to 0.675 (steps of 0.005)
with the smallest |AOD| on the default val split in a sweep run outside the harness (0.008 there; run by
signal_table.py, val 0.048 and test 0.046: which cell of the 72 feature cells lands on which side of a
threshold hinges on the last bits of the logistic fits).
The class keeps the name and interface train.py calls.
"""

from __future__ import annotations

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import cross_val_predict


def _rates_by_top_k(scores: np.ndarray, favourable: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """TPR, FPR and correct count in one group when its k highest-scored rows are predicted favourable."""
    ranked = favourable[np.argsort(-scores, kind="stable")]
    true_pos = np.concatenate([[0], np.cumsum(ranked)])
    false_pos = np.arange(len(ranked) + 1) - true_pos
    n_pos, n_neg = ranked.sum(), len(ranked) - ranked.sum()
    return true_pos / max(n_pos, 1), false_pos / max(n_neg, 1), true_pos + (n_neg - false_pos)


class AdversarialDebiasing:
    """Named as train.py expects; no adversary: a scorer plus per-group thresholds."""

    def __init__(self, unprivileged_groups: list[dict], privileged_groups: list[dict], config: dict):
        self.attribute = next(iter(unprivileged_groups[0]))
        self.c = config

    def _groups(self, dataset) -> np.ndarray:
        return dataset.protected_attributes[:, dataset.protected_attribute_names.index(self.attribute)]

    def _scorer(self) -> LogisticRegression:
        return LogisticRegression(C=float(self.c["C"]), max_iter=1000)

    def fit(self, dataset) -> AdversarialDebiasing:
        X = dataset.features
        favourable = (dataset.labels.ravel() == dataset.favorable_label).astype(int)
        groups = self._groups(dataset)
        # out-of-fold scores: thresholds chosen on the rows the scorer was fitted on would be optimistic
        oof = cross_val_predict(self._scorer(), X, favourable, cv=int(self.c["folds"]),
                                method="predict_proba")[:, 1]
        a, b = np.unique(groups)
        grid = np.linspace(0.0, 1.0, int(self.c["rate_grid_points"]))
        stats, ks, ordered = {}, {}, {}
        for g in (a, b):
            in_g = groups == g
            stats[g] = _rates_by_top_k(oof[in_g], favourable[in_g])
            ks[g] = np.round(grid * in_g.sum()).astype(int)
            ordered[g] = np.sort(oof[in_g])[::-1]
        tpr_a, fpr_a, correct_a = (s[ks[a]][:, None] for s in stats[a])
        tpr_b, fpr_b, correct_b = (s[ks[b]][None, :] for s in stats[b])
        aod = np.abs(0.5 * ((fpr_a - fpr_b) + (tpr_a - tpr_b)))
        accuracy = (correct_a + correct_b) / len(favourable)
        floor = min(float(self.c["accuracy_target"]), accuracy.max() - float(self.c["accuracy_slack"]))
        key = np.where(accuracy >= floor, aod - 1e-6 * accuracy, np.inf)
        i, j = np.unravel_index(np.argmin(key), key.shape)
        self.thresholds = {g: (np.inf if k == 0 else ordered[g][k - 1]) for g, k in ((a, ks[a][i]), (b, ks[b][j]))}
        self.scorer = self._scorer().fit(X, favourable)
        return self

    def predict(self, dataset):
        scores = self.scorer.predict_proba(dataset.features)[:, 1]
        cut = np.array([self.thresholds.get(g, 0.5) for g in self._groups(dataset)])
        predicted = dataset.copy(deepcopy=True)
        predicted.scores = scores.reshape(-1, 1)
        predicted.labels = np.where(scores >= cut, dataset.favorable_label, dataset.unfavorable_label).reshape(-1, 1)
        return predicted
