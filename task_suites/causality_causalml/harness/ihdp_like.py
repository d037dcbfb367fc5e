"""An IHDP-like semi-synthetic data set with known individual treatment effects, in several replications.

IHDP (Hill, 2011, "Bayesian nonparametric modeling for causal inference") takes the real covariates of
a randomized trial, removes a non-random subset of the treated units (so that treatment becomes
confounded and the groups stop overlapping in one covariate), and simulates both potential outcomes
with "response surface B":

    mu0(x) = exp((x + 0.5) . beta),   mu1(x) = x . beta - omega,   y = mu_t(x) + N(0, 1),

beta drawn from {0, .1, .2, .3, .4} with probabilities {.6, .1, .1, .1, .1} and omega chosen so that
the average effect on the treated is 4. IHDP's own covariates cannot be downloaded here, so the same
recipe runs on real survey covariates that ship with statsmodels (the 1996 American National
Election Study, 944 respondents): seven continuous/ordinal columns, standardised, and thirteen 0/1
columns (the expected vote and one-hot education and party identification), 20 covariates in all
(IHDP has 25). Treated units who expected to vote Dole are removed, the analogue of Hill's removal of
treated children with non-white mothers.

As IHDP is used, the units and their treatments are drawn once and the outcomes are simulated several
times (replications: a new beta, omega and outcome noise each). Replication 0 is version 1's single
draw (simulation seed 2, effect spread 1.4); the others are the first draws, in seed order, whose effect
spread (standard deviation) lies in SPREAD_BAND around it: response surface B's spread ranges from 0.4 to
8 over seeds, and a few wide draws would otherwise outweigh all others in the averaged error.

The true effect of a unit is mu1(x) - mu0(x). Everything is drawn from fixed seeds, so every call returns
the same arrays; this module lives in harness/ only, so nothing editable sees the seeds, beta or omega.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from statsmodels.datasets import anes96

SIMULATION_SEED = 2  # treatment assignment, and replication 0's beta and outcome noise (version 1's draw)
REPLICATION_SEED = 90_210  # with a candidate number, the later replications' beta and outcome noise
REPLICATIONS = 3
SPREAD_BAND = (1.0, 2.0)  # the effect standard deviations a later replication may have (replication 0: 1.38)
TEST_SEED = 7_472_011  # carves the hidden test units
TEST_FRACTION = 0.21  # as the original task's hidden test carve
P_ASSIGN = 0.35  # share of respondents assigned to treatment before the non-random removal
TARGET_ATT = 4.0  # Hill's surface B sets the average effect on the treated to 4

CONTINUOUS = ["logpopul", "TVnews", "selfLR", "ClinLR", "DoleLR", "age", "income"]
EDUC_LEVELS = [1, 2, 3, 5, 6, 7]  # level 4 ("some college") is the reference
PID_LEVELS = [0, 1, 2, 4, 5, 6]  # level 3 ("independent") is the reference


def covariates() -> pd.DataFrame:
    """The 20 covariates of all 944 respondents (continuous ones standardised)."""
    raw = anes96.load_pandas().data
    columns = {}
    for name in CONTINUOUS:
        values = raw[name].to_numpy(dtype=float)
        columns[name] = (values - values.mean()) / values.std()
    columns["vote_dole"] = raw["vote"].to_numpy(dtype=float)
    for level in EDUC_LEVELS:
        columns[f"educ_{level}"] = (raw["educ"] == level).to_numpy(dtype=float)
    for level in PID_LEVELS:
        columns[f"pid_{level}"] = (raw["PID"] == level).to_numpy(dtype=float)
    return pd.DataFrame(columns)


def response_surface_b(x: np.ndarray, treatment: np.ndarray,
                       rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One draw of (y, mu0, mu1): beta, omega (the treated's average effect is TARGET_ATT) and the noise."""
    beta = rng.choice([0.0, 0.1, 0.2, 0.3, 0.4], size=x.shape[1], p=[0.6, 0.1, 0.1, 0.1, 0.1])
    mu0 = np.exp((x + 0.5) @ beta)
    linear = x @ beta
    omega = np.mean(linear[treatment == 1] - mu0[treatment == 1]) - TARGET_ATT
    mu1 = linear - omega
    y = np.where(treatment == 1, mu1, mu0) + rng.normal(size=len(x))
    return y, mu0, mu1


def simulate() -> tuple[pd.DataFrame, list[tuple[np.ndarray, np.ndarray, np.ndarray]]]:
    """The units kept after the removal (covariates and treatment) and REPLICATIONS draws of (y, mu0, mu1)."""
    rng = np.random.default_rng(SIMULATION_SEED)
    X = covariates()
    assigned = rng.random(len(X)) < P_ASSIGN
    # the non-random removal that breaks the randomisation (and overlap in vote_dole)
    keep = ~(assigned & (X["vote_dole"].to_numpy() == 1.0))
    X, treatment = X[keep].reset_index(drop=True), assigned[keep].astype(int)
    x = X.to_numpy()
    draws = [response_surface_b(x, treatment, rng)]  # the stream goes on from the assignment, as in version 1
    candidate = 0
    while len(draws) < REPLICATIONS:
        y, mu0, mu1 = response_surface_b(x, treatment, np.random.default_rng([REPLICATION_SEED, candidate]))
        candidate += 1
        if SPREAD_BAND[0] <= np.std(mu1 - mu0) <= SPREAD_BAND[1]:
            draws.append((y, mu0, mu1))
    return X.assign(treatment=treatment), draws


def visible_and_test() -> tuple[pd.DataFrame, pd.DataFrame, np.ndarray, np.ndarray]:
    """The units cut once, with the harness-only seed, into the visible pool and the hidden test: the pool
    (covariates, treatment, one observed outcome column y_r per replication), the test units (covariates,
    treatment), and the true effects of each, shape (REPLICATIONS, units)."""
    units, draws = simulate()
    order = np.random.default_rng(TEST_SEED).permutation(len(units))
    n_test = int(round(len(units) * TEST_FRACTION))
    test_rows, visible_rows = np.sort(order[:n_test]), np.sort(order[n_test:])
    outcomes = pd.DataFrame({f"y_{r}": y for r, (y, _, _) in enumerate(draws)})
    effects = np.stack([mu1 - mu0 for _, mu0, mu1 in draws])
    visible = pd.concat([units, outcomes], axis=1).iloc[visible_rows].reset_index(drop=True)
    test = units.iloc[test_rows].reset_index(drop=True)
    return visible, test, effects[:, visible_rows], effects[:, test_rows]
