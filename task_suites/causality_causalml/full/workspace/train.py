"""Experiment driver (protected): causalml's DragonNet on IHDP, FML-bench's Causality_causalml protocol.

    python train.py --split val  --out OUT   train on the train part of data/visible.csv (split_config.json),
                                             estimate the effects of its val part
    python train.py --split test --out OUT   train on the train part of the original's default cut (val_ratio
                                             0.114, val_seed 42), as the original's test command does, and
                                             estimate the effects of OUT/test_covariates.csv

Writes OUT/ite_predictions.npy (one estimated effect per scored unit, in the file's order). The model is
causalml.inference.tf.DragonNet(neurons_per_layer=200, val_split=0.3, targeted_reg=True), the call of the
original: improve DragonNet itself in causalml/inference/tf/. --scale smoke trains one epoch per phase.
"""

from __future__ import annotations

import os
import random
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.model_selection import train_test_split

from pytest_fmlbench.evalkit import SplitConfig, harness_args, load_split_config, write_json

HERE = Path(__file__).resolve().parent
SEED = 42
DEFAULT_SPLIT = SplitConfig(val_ratio=0.114, val_seed=42)
COVARIATES = [f"x{i}" for i in range(1, 26)]
MODEL_ARGS = {"neurons_per_layer": 200, "val_split": 0.3, "targeted_reg": True}
SMOKE_ARGS = {"adam_epochs": 1, "epochs": 1}


def seed_everything() -> None:
    """The original's seeding: Python, numpy and TensorFlow at 42, deterministic TensorFlow kernels."""
    os.environ["PYTHONHASHSEED"] = str(SEED)
    os.environ["TF_DETERMINISTIC_OPS"] = "1"
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    random.seed(SEED)
    np.random.seed(SEED)
    tf.random.set_seed(SEED)


def main() -> None:
    args = harness_args()
    if args.out is None:
        sys.exit("train.py: --out is required")
    args.out.mkdir(parents=True, exist_ok=True)
    seed_everything()
    # causalml is this workspace's copy (the upstream checkout), as in the original, which runs from the repository
    sys.path.insert(0, str(HERE))
    from causalml.inference.tf import DragonNet

    visible = pd.read_csv(HERE / "data" / "visible.csv")
    split = load_split_config(HERE) if args.split == "val" else DEFAULT_SPLIT
    train_pos, val_pos = train_test_split(np.arange(len(visible)), test_size=split.val_ratio,
                                          random_state=split.val_seed, shuffle=True)
    train = visible.iloc[train_pos]
    print(f"train {len(train_pos)}, val {len(val_pos)} (val_ratio {split.val_ratio}, val_seed {split.val_seed})",
          flush=True)

    dragon = DragonNet(**MODEL_ARGS, **(SMOKE_ARGS if args.scale == "smoke" else {}))
    dragon.fit(train[COVARIATES], train["treatment"], train["y_factual"])

    scored = visible.iloc[val_pos][COVARIATES] if args.split == "val" else \
        pd.read_csv(args.out / "test_covariates.csv")[COVARIATES]
    estimates = np.asarray(dragon.predict_tau(scored), dtype=np.float64).reshape(-1)
    np.save(args.out / "ite_predictions.npy", estimates)
    write_json(args.out / "run_info.json", {"split": args.split, "n_train": len(train_pos), "n_scored": len(scored),
                                            "ate_estimate": float(estimates.mean())})
    print(f"{args.split}: {len(scored)} effects estimated, mean {estimates.mean():.4f}", flush=True)


if __name__ == "__main__":
    main()
