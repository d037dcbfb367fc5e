"""Materialise Adult (OpenML 1590) for one split, from the verified adult.arff in the data cache ({data}).

The original's protocol (FML-bench's Fairness_fairlearn): the frame fetch_openml("adult", version=2)
returns; numeric gaps filled with the column's median and the categorical columns one-hot encoded with
their first category dropped, over all 48,842 rows (sex too: the baseline is fairness-unaware); label
1 for ">50K"; the sensitive feature is sex. A hidden test of 21% is carved first with scikit-learn's
train_test_split(test_size=0.21, random_state=42, stratify=label); the rest is the visible pool, in the
order that call returns it (split_config.json's stratified cut depends on that order).

--split val : the visible pool (encoded features, sex, label) into WORKSPACE/data/, its sex and labels
              into PRIVATE.
--split test: the hidden test's encoded features (no sex column, no labels) into OUT, its sex and
              labels into PRIVATE.
"""

from __future__ import annotations

import gzip
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.model_selection import train_test_split

from pytest_fmlbench.evalkit import harness_args
from pytest_fmlbench.taskkit import adult

ARFF = ("openml-adult-1590", "adult.arff")
TEST_FRACTION, TEST_SEED = 0.21, 42
SENSITIVE, LABEL = "sex", "class"


def encode(features: pd.DataFrame) -> pd.DataFrame:
    """The original script's features: numeric columns (gaps filled with their median), then each categorical
    column one-hot (pandas' get_dummies, first category dropped, a missing value all zeros)."""
    numeric = features.select_dtypes(include=[np.number]).columns.tolist()
    categorical = features.select_dtypes(exclude=[np.number]).columns.tolist()
    features = features.copy()
    features[numeric] = features[numeric].fillna(features[numeric].median())
    return pd.get_dummies(features, columns=categorical, drop_first=True).fillna(0)


def load(path) -> tuple[pd.DataFrame, pd.Series, np.ndarray]:
    """(encoded features, sex, 0/1 label) of every row, in the file's order."""
    features, target = adult.read(path)
    label = (target == adult.POSITIVE).astype(int).to_numpy()
    return encode(features), features[SENSITIVE].astype(str), label


def cut(label: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(visible pool, hidden test) positions, as the original's train_test_split returns them."""
    return train_test_split(np.arange(len(label)), test_size=TEST_FRACTION, random_state=TEST_SEED, stratify=label)


def write_csv_gz(frame: pd.DataFrame, path: Path) -> None:
    """The same frame, the same bytes: no time stamp or file name in the gzip header (the workspace's data/ is
    hashed, and every fresh workspace must hash the same)."""
    path.write_bytes(gzip.compress(frame.to_csv(index=False).encode(), mtime=0))


def main() -> None:
    args = harness_args()
    if args.private is None or args.data is None:
        sys.exit("prepare.py: --private and --data are required")
    features, sex, label = load(args.data.joinpath(*ARFF))
    visible, test = cut(label)
    args.private.mkdir(parents=True, exist_ok=True)
    if args.split == "val":
        if args.workspace is None:
            sys.exit("prepare.py: --workspace is required for --split val")
        data = args.workspace / "data"
        data.mkdir(parents=True, exist_ok=True)
        pool = features.iloc[visible].reset_index(drop=True)
        pool[SENSITIVE], pool[LABEL] = sex.iloc[visible].to_numpy(), label[visible]
        write_csv_gz(pool, data / "visible.csv.gz")
        pd.DataFrame({SENSITIVE: sex.iloc[visible].to_numpy(), LABEL: label[visible]}).to_csv(
            args.private / "visible_labels.csv", index=False)
    else:
        if args.out is None:
            sys.exit("prepare.py: --out is required for --split test")
        args.out.mkdir(parents=True, exist_ok=True)
        write_csv_gz(features.iloc[test].reset_index(drop=True), args.out / "test_inputs.csv.gz")
        pd.DataFrame({SENSITIVE: sex.iloc[test].to_numpy(), LABEL: label[test]}).to_csv(
            args.private / "test_labels.csv", index=False)


if __name__ == "__main__":
    main()
