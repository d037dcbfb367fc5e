"""Materialise the data of the fairness_fairlearn task.

The original task uses the UCI Adult census data (income > 50K, sensitive feature: sex). Adult cannot
be downloaded here, so this script simulates an Adult-like population instead: the same kinds of
columns, a label whose base rate differs strongly between the sexes, and the proxies (relationship,
occupation, hours worked) through which an unconstrained classifier picks that gap up even when it
never sees the sex column. Everything is drawn from fixed seeds, so every call writes the same bytes.

    --split val   writes the visible pool (features, sex, income) into WORKSPACE/data/ and the pool's
                  labels and sexes into PRIVATE (the evaluator reads only this private copy);
    --split test  writes the hidden-test inputs (features and sex, no income) into OUT and the test
                  labels and sexes into PRIVATE.
"""

from __future__ import annotations


import numpy as np
import pandas as pd

from pytest_fmlbench.evalkit import harness_args

N_ROWS = 16_000
TEST_FRACTION = 0.25
DATA_SEED = 11_042_015  # draws the population
TEST_SEED = 77_310  # carves the hidden test rows; lives only in harness/

FEATURES = [
    "age",
    "workclass",
    "education_num",
    "marital_status",
    "relationship",
    "occupation",
    "hours_per_week",
    "capital_gain",
    "capital_loss",
]
SENSITIVE = "sex"
LABEL = "income"

# occupation: (base logit, education slope, male shift, effect on the income logit). The male shifts
# mirror Adult's occupational segregation, which is one of the proxies for sex.
OCCUPATIONS = {
    "Exec-managerial": (0.0, 0.35, 0.3, 0.80),
    "Prof-specialty": (-0.2, 0.60, 0.0, 0.70),
    "Tech-support": (-1.2, 0.25, 0.1, 0.40),
    "Sales": (0.0, 0.10, 0.2, 0.30),
    "Protective-serv": (-1.5, 0.00, 1.3, 0.30),
    "Craft-repair": (-0.6, -0.10, 1.6, 0.00),
    "Transport-moving": (-1.2, -0.25, 1.8, -0.10),
    "Adm-clerical": (0.3, 0.10, -1.2, -0.30),
    "Machine-op-inspct": (-0.6, -0.25, 0.5, -0.40),
    "Handlers-cleaners": (-1.0, -0.35, 1.2, -0.80),
    "Other-service": (0.2, -0.30, -0.6, -1.00),
}
WORKCLASSES = {"Private": 0.0, "Self-emp": 0.35, "Government": 0.15}


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-z))


def _pick(rng: np.random.Generator, logits: np.ndarray) -> np.ndarray:
    """One categorical draw per row from unnormalised logits (Gumbel-max)."""
    return np.argmax(logits + rng.gumbel(size=logits.shape), axis=1)


def generate(n: int = N_ROWS, seed: int = DATA_SEED) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    male = rng.random(n) < 0.67
    age = np.clip(np.round(17 + rng.gamma(2.6, 8.0, n)), 17, 90).astype(int)
    education = np.clip(np.round(rng.normal(10.1, 2.6, n)), 1, 16).astype(int)

    # Far fewer women than men in the sample are married (as in Adult), so "Husband" is a strong proxy.
    years = age - 17
    p_married = _sigmoid(-1.8 + 0.13 * years - 0.0017 * years**2 + np.where(male, 1.3, -1.2))
    married = rng.random(n) < p_married
    single_status = np.array(["Never-married", "Divorced", "Separated", "Widowed"])
    single_logits = np.stack(
        [
            2.0 - 0.08 * years,
            -0.5 + 0.02 * years + 0.4 * ~male,
            np.full(n, -1.8) + 0.2 * ~male,
            -4.5 + 0.07 * years + 0.8 * ~male,
        ],
        axis=1,
    )
    marital = np.where(married, "Married", single_status[_pick(rng, single_logits)])

    single_rel = np.array(["Own-child", "Not-in-family", "Unmarried", "Other-relative"])
    rel_logits = np.stack(
        [
            1.5 - 0.15 * years,
            np.full(n, 0.8),
            -0.6 + 1.1 * ~male,
            np.full(n, -1.5),
        ],
        axis=1,
    )
    relationship = np.where(
        married, np.where(male, "Husband", "Wife"), single_rel[_pick(rng, rel_logits)]
    )

    occ_names = np.array(list(OCCUPATIONS))
    occ_par = np.array(list(OCCUPATIONS.values()))
    occ_logits = occ_par[:, 0] + np.outer(education - 10, occ_par[:, 1]) + np.outer(male, occ_par[:, 2])
    occ_idx = _pick(rng, occ_logits)
    occupation = occ_names[occ_idx]

    wc_names = np.array(list(WORKCLASSES))
    wc_logits = np.stack([np.full(n, 1.6), -1.0 + 0.03 * years, 0.05 * (education - 10.0)], axis=1)
    workclass = wc_names[_pick(rng, wc_logits)]

    # Men report more paid hours, married men most; the young work part-time.
    hours = rng.normal(37.0 + 5.5 * male + 2.0 * (married & male) - 1.2 * np.maximum(0, 22 - age), 10.0)
    hours = np.clip(np.round(hours), 1, 99).astype(int)

    has_gain = rng.random(n) < _sigmoid(-3.1 + 0.03 * (age - 38) + 0.22 * (education - 10))
    gain = np.where(has_gain, np.round(np.exp(rng.normal(8.3, 1.0, n))), 0).astype(int)
    has_loss = rng.random(n) < 0.045
    loss = np.where(has_loss, np.round(np.clip(rng.normal(1900, 350, n), 150, 4300)), 0).astype(int)

    logit = (
        -2.9
        + 0.045 * (age - 38)
        - 0.0012 * (age - 38) ** 2
        + 0.33 * (education - 10)
        + 1.9 * married
        + occ_par[occ_idx, 3]
        + np.array([WORKCLASSES[w] for w in workclass])
        + 0.035 * (hours - 40)
        + 2.8 * (gain > 5000)
        + 0.6 * (loss > 1500)
        + 0.25 * male  # a direct, historical effect of sex on pay
    )
    # The 1.4 sharpens the score so that base rates (11% of women, 31% of men) and the accuracy a
    # logistic regression reaches (~0.85) land where they are on Adult.
    income = (rng.random(n) < _sigmoid(1.4 * logit)).astype(int)

    return pd.DataFrame(
        {
            "age": age,
            "workclass": workclass,
            "education_num": education,
            "marital_status": marital,
            "relationship": relationship,
            "occupation": occupation,
            "hours_per_week": hours,
            "capital_gain": gain,
            "capital_loss": loss,
            SENSITIVE: np.where(male, "Male", "Female"),
            LABEL: income,
        }
    )


def visible_and_test() -> tuple[pd.DataFrame, pd.DataFrame]:
    """The population cut once, with the harness-only seed, into the visible pool and the hidden test."""
    data = generate()
    order = np.random.default_rng(TEST_SEED).permutation(len(data))
    n_test = int(round(len(data) * TEST_FRACTION))
    test_rows, visible_rows = np.sort(order[:n_test]), np.sort(order[n_test:])
    return data.iloc[visible_rows].reset_index(drop=True), data.iloc[test_rows].reset_index(drop=True)


def main() -> None:
    args = harness_args()
    if args.private is None:
        raise SystemExit("prepare.py: --private is required")
    visible, test = visible_and_test()
    args.private.mkdir(parents=True, exist_ok=True)
    if args.split == "val":
        if args.workspace is None:
            raise SystemExit("prepare.py: --workspace is required for --split val")
        data_dir = args.workspace / "data"
        data_dir.mkdir(parents=True, exist_ok=True)
        visible[FEATURES + [SENSITIVE, LABEL]].to_csv(data_dir / "visible.csv", index=False)
        visible[[SENSITIVE, LABEL]].to_csv(args.private / "visible_labels.csv", index=False)
    else:
        if args.out is None:
            raise SystemExit("prepare.py: --out is required for --split test")
        args.out.mkdir(parents=True, exist_ok=True)
        test[FEATURES + [SENSITIVE]].to_csv(args.out / "test_inputs.csv", index=False)
        test[[SENSITIVE, LABEL]].to_csv(args.private / "test_labels.csv", index=False)


if __name__ == "__main__":
    main()
