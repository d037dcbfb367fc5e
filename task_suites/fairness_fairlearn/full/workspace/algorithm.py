"""The method (editable): a fairness-unaware baseline, FML-bench's Fairness_fairlearn.

Baseline: scikit-learn's LogisticRegression (max_iter 1000, random_state 42) on standardised features,
trained for accuracy alone. It ignores the sensitive feature, yet sex is among its inputs (the one-hot
column sex_Male) and its proxies (relationship, occupation, hours worked) carry the rest, so its
selection rates differ widely between women and men.

train.py uses one class:
  FairnessAlgorithm()                                   built with no arguments
  .fit(X, y, sensitive_features) -> self                X: pandas DataFrame of the encoded features;
                                                        y: pandas Series of 0/1 labels (1: income > 50K);
                                                        sensitive_features: pandas Series, sex ("Female"/"Male")
  .predict(X) -> array of 0/1, one per row of X         X only: at prediction time the sensitive feature is
                                                        what X says (sex_Male)
The fitted object is pickled between the val run and the test run, so keep it picklable. Fairlearn's
reductions (ExponentiatedGradient, GridSearch), post-processing (ThresholdOptimizer), pre-processing
(CorrelationRemover) and any scikit-learn model are available.
"""

from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler


class FairnessAlgorithm:
    """Standardise, then an unconstrained logistic regression; the sensitive feature is not used."""

    def __init__(self):
        self.model = Pipeline([
            ("scale", StandardScaler()),
            ("logistic", LogisticRegression(max_iter=1000, random_state=42)),
        ])

    def fit(self, X, y, sensitive_features=None):
        self.model.fit(X, y)
        return self

    def predict(self, X):
        return self.model.predict(X)

    def predict_proba(self, X):
        return self.model.predict_proba(X)
