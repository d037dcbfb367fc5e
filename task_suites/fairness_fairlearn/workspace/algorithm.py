"""The method: an unconstrained logistic regression (the baseline of the Fairlearn / Adult task).

train.py calls ``fit_predict`` once per run. Change anything in this file (a fairness-aware learner
from fairlearn.reductions, post-processing with fairlearn.postprocessing.ThresholdOptimizer,
reweighting, another model...) as long as ``fit_predict`` keeps its signature and returns one 0/1
prediction per row of ``X_eval``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from sklearn.compose import ColumnTransformer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

NUMERIC = ["age", "education_num", "hours_per_week", "capital_gain", "capital_loss"]
CATEGORICAL = ["workclass", "marital_status", "relationship", "occupation"]


def _with_sensitive(X: pd.DataFrame, A: pd.Series, use: bool) -> pd.DataFrame:
    # Dropping the sex column ("fairness through unawareness") barely helps here: relationship,
    # occupation and hours carry most of the same information.
    return X.assign(sex=A.to_numpy()) if use else X


def fit_predict(
    X_train: pd.DataFrame,
    y_train: np.ndarray,
    A_train: pd.Series,
    X_eval: pd.DataFrame,
    A_eval: pd.Series,
    config: dict,
) -> np.ndarray:
    """Fit on the training rows, return 0/1 predictions (income > 50K) for the evaluation rows.

    X_*: the feature columns (without sex); A_*: the sensitive feature ("Female"/"Male"), available at
    training and at prediction time; y_train: 0/1 labels; config: the contents of config.json.
    """
    use_a = bool(config["use_sensitive_feature"])
    categorical = CATEGORICAL + (["sex"] if use_a else [])
    features = ColumnTransformer(
        [
            ("numeric", StandardScaler(), NUMERIC),
            ("categorical", OneHotEncoder(handle_unknown="ignore"), categorical),
        ]
    )
    class_weight = None if config["class_weight"] == "none" else config["class_weight"]
    model = make_pipeline(
        features,
        LogisticRegression(
            C=float(config["C"]),
            max_iter=int(config["max_iter"]),
            class_weight=class_weight,
            random_state=int(config["seed"]),
        ),
    )
    model.fit(_with_sensitive(X_train, A_train, use_a), y_train)
    scores = model.predict_proba(_with_sensitive(X_eval, A_eval, use_a))[:, 1]
    return (scores >= float(config["threshold"])).astype(int)
