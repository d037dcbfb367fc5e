"""IHDP as causalml ships it (``docs/examples/data/ihdp_npci_<k>.csv``) and FML-bench's Causality_causalml splits.

Each file is one replication of the semi-synthetic Infant Health and Development Program benchmark: one row per
unit, no header, 30 columns: treatment (0/1), y_factual, y_cfactual, mu0, mu1 (the noiseless outcomes), then
the covariates x1..x25 (x1..x6 continuous, the rest binary). The original scores estimated individual effects
against the difference of the two simulated outcomes (``tau``, outcome noise included).

Its splits are scikit-learn's ``train_test_split`` (shuffled): the hidden test (21%, random_state 42) first, then
the visible pool's validation part (``val_ratio``, ``val_seed`` of split_config.json), each in that function's
order. ``write_fixture`` writes a small file in the same format for ``--scale=smoke``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

COVARIATES = [f"x{i}" for i in range(1, 26)]
COLUMNS = ["treatment", "y_factual", "y_cfactual", "mu0", "mu1", *COVARIATES]
CONTINUOUS = 6
TEST_FRACTION, TEST_SEED = 0.21, 42


def read(path: Path) -> pd.DataFrame:
    """The units of one replication, with their true effect ``tau``."""
    units = pd.read_csv(path, header=None)
    if units.shape[1] != len(COLUMNS):
        raise ValueError(f"{Path(path).name}: {units.shape[1]} columns, IHDP has {len(COLUMNS)}")
    units.columns = COLUMNS
    treated = units["treatment"] == 1
    units["tau"] = np.where(treated, units["y_factual"] - units["y_cfactual"], units["y_cfactual"] - units["y_factual"])
    return units


def hidden_test(n: int) -> tuple[np.ndarray, np.ndarray]:
    """(hidden test positions, visible pool positions) of ``n`` units, in the original's order."""
    from sklearn.model_selection import train_test_split  # on use: scikit-learn costs a second to import

    visible, test = train_test_split(np.arange(n), test_size=TEST_FRACTION, random_state=TEST_SEED, shuffle=True)
    return test, visible


def visible_split(n: int, val_ratio: float, val_seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(train positions, val positions) into the visible pool of ``n`` units, in the original's order."""
    from sklearn.model_selection import train_test_split

    train, val = train_test_split(np.arange(n), test_size=val_ratio, random_state=val_seed, shuffle=True)
    return train, val


def write_fixture(path: Path, n: int = 120, seed: int = 3) -> None:
    """A small replication in IHDP's format: covariates like IHDP's, a nonlinear control surface, an effect
    of about 4 that varies with x1, unit-variance outcome noise and treatment that depends on x2."""
    rng = np.random.default_rng(seed)
    continuous = rng.standard_normal((n, CONTINUOUS))
    binary = (rng.random((n, len(COVARIATES) - CONTINUOUS)) < 0.4).astype(float)
    x = np.hstack([continuous, binary])
    treatment = (rng.random(n) < 1 / (1 + np.exp(-x[:, 1]))).astype(int)
    mu0 = np.exp(0.3 * x[:, 0] + 0.2 * x[:, 2]) + binary[:, :3].sum(axis=1)
    mu1 = mu0 + 4 + x[:, 0]
    y0, y1 = mu0 + rng.standard_normal(n), mu1 + rng.standard_normal(n)
    factual, counterfactual = np.where(treatment == 1, y1, y0), np.where(treatment == 1, y0, y1)
    table = np.column_stack([treatment, factual, counterfactual, mu0, mu1, x])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(_fields(row) + "\n" for row in table))


def _fields(row: np.ndarray) -> str:
    # treatment and the binary covariates as integers, as in causalml's files; the rest at full precision
    return ",".join(str(int(v)) if k == 0 or k >= 5 + CONTINUOUS else repr(float(v)) for k, v in enumerate(row))
