"""A COMPAS-like recidivism population, in the columns of AIF360's preprocessed COMPAS data.

The original task loads COMPAS with ``aif360...load_preproc_data_compas()``: ProPublica's two-year
recidivism table (compas-scores-two-years.csv, 6,172 defendants after ProPublica's filters; 4,997 men and
1,175 women; 3,175 African-American and 2,103 Caucasian defendants; 2,809 re-offended within two
years), cut to the 5,278 African-American and Caucasian defendants, with the columns sex (1 = Female,
the privileged group), race (1 = Caucasian), age_cat, priors_count (0 / 1 to 3 / More than 3),
c_charge_degree (F / M) and the label two_year_recid (0 = no recidivism, the favourable outcome).
AIF360 ships no data files and nothing can be downloaded here, so this module draws defendants with
those columns and ProPublica's published shares (version 2 of the task draws 14,778, 2.8 times COMPAS's
5,278, so that its val and hidden test splits score a method rather than a sample): 60%
African-American; 17% women among African-American and 22% among Caucasian defendants; younger
African-American defendants; more prior charges for men, older and African-American defendants; and a
two-year recidivism rate of about 47% overall, about 52% for African-American and 39% for Caucasian
defendants, about 48% for men and 36% for women (the approximate rates of the AIF360 subset). The
label depends on age, priors, charge degree, sex and race, so the sex gap in outcomes reaches a
classifier both directly and through priors.

Everything is drawn from fixed seeds: every call returns the same table. This module lives in harness/
only, so nothing editable sees the seeds.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

N_ROWS = 14_778  # 2.8 x COMPAS's 5,278: 25% train (as many rows as version 1's 70%), 25% val, 50% test
DATA_SEED = 61_722_809
TEST_SEED = 52_780_021  # carves the hidden test rows
TEST_FRACTION = 0.5  # version 1 (the original's shares): 0.21 of 5,278

COLUMNS = ["sex", "race", "age_cat", "priors_count", "c_charge_degree"]
LABEL = "two_year_recid"
AGE_CATS = np.array(["Less than 25", "25 to 45", "Greater than 45"])
PRIORS = np.array(["0", "1 to 3", "More than 3"])


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-z))


def _pick(rng: np.random.Generator, logits: np.ndarray) -> np.ndarray:
    """One categorical draw per row from unnormalised logits (Gumbel-max)."""
    return np.argmax(logits + rng.gumbel(size=logits.shape), axis=1)


def generate(n: int = N_ROWS, seed: int = DATA_SEED) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    caucasian = rng.random(n) < 2103 / 5278
    female = rng.random(n) < np.where(caucasian, 0.22, 0.17)
    # age_cat: about 22% under 25, 57% 25 to 45, 21% over 45; Caucasian defendants are older
    age = _pick(rng, np.stack([np.where(caucasian, -1.2, -0.7), np.zeros(n), np.where(caucasian, -0.6, -1.3)], 1))
    # priors: about a third each; more for men, older and African-American defendants
    drive = 0.7 * ~female + 0.4 * ~caucasian + np.array([-0.6, 0.0, 0.5])[age] - 0.8
    priors = _pick(rng, np.stack([-drive, np.zeros(n), drive - 0.2], 1))
    felony = rng.random(n) < _sigmoid(0.35 + 0.35 * priors)
    logit = (
        -0.6
        + np.array([0.55, 0.0, -0.65])[age]
        + np.array([-0.85, 0.0, 1.0])[priors]
        + 0.2 * felony
        + 0.3 * ~female
        + 0.15 * ~caucasian
    )
    recid = (rng.random(n) < _sigmoid(logit)).astype(int)
    return pd.DataFrame({
        "sex": female.astype(float),
        "race": caucasian.astype(float),
        "age_cat": AGE_CATS[age],
        "priors_count": PRIORS[priors],
        "c_charge_degree": np.where(felony, "F", "M"),
        LABEL: recid,
    })


def visible_and_test() -> tuple[pd.DataFrame, pd.DataFrame]:
    """The population cut once, with the harness-only seed, into the visible pool and the hidden test."""
    data = generate()
    order = np.random.default_rng(TEST_SEED).permutation(len(data))
    n_test = int(round(len(data) * TEST_FRACTION))
    test_rows, visible_rows = np.sort(order[:n_test]), np.sort(order[n_test:])
    return data.iloc[visible_rows].reset_index(drop=True), data.iloc[test_rows].reset_index(drop=True)


def to_aif360(table: pd.DataFrame):
    """``table`` as AIF360's load_preproc_data_compas() builds COMPAS: a StandardDataset with sex and race
    as protected attributes (privileged: Female, Caucasian), one-hot age_cat, priors_count and
    c_charge_degree, and two_year_recid = 0 as the favourable label."""
    from aif360.datasets import StandardDataset

    return StandardDataset(
        table[COLUMNS + [LABEL]].copy(),
        label_name=LABEL,
        favorable_classes=[0],
        protected_attribute_names=["sex", "race"],
        privileged_classes=[[1.0], [1.0]],
        categorical_features=["age_cat", "priors_count", "c_charge_degree"],
        features_to_keep=COLUMNS + [LABEL],
        metadata={"label_maps": [{1.0: "Did recid.", 0.0: "No recid."}],
                  "protected_attribute_maps": [{0.0: "Male", 1.0: "Female"}, {1.0: "Caucasian", 0.0: "Not Caucasian"}]},
    )
