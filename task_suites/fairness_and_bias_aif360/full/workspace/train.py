"""Experiment driver (protected): FML-bench's Fairness_and_Bias_aif360 protocol, AIF360's AdversarialDebiasing
(this workspace's aif360/algorithms/inprocessing/adversarial_debiasing.py) on COMPAS.

    python train.py --split val  --out OUT   train on data/train.csv, predict the val rows (data/val_inputs.csv)
    python train.py --split test --out OUT   train again, the same way, and predict the hidden test rows
                                             (OUT/test_inputs.csv)

The test run trains again, as the original's test command does: AdversarialDebiasing keeps its model in a
TensorFlow 1 session, which cannot be pickled into a checkpoint. Both runs seed Python, NumPy and TensorFlow
with 233 and make the original's two shuffles' draws first, so they train the same model. The rows to predict
reach predict() with their labels and scores zeroed, as in the original. Writes OUT/predictions.npy (int8,
two_year_recid: 0 no recidivism, the favorable label; 1 recidivism) and OUT/run_info.json.
"""

from __future__ import annotations

import json
import logging
import os
import random
import sys
import time
import warnings
from pathlib import Path

# as the original, before TensorFlow loads
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
os.environ["TF_ENABLE_ONEDNN_OPTS"] = "0"
os.environ["TF_DETERMINISTIC_OPS"] = "1"
warnings.filterwarnings("ignore")
logging.getLogger("tensorflow").setLevel(logging.FATAL)

import numpy as np
import pandas as pd
import tensorflow
import tensorflow.compat.v1 as tf

tf.disable_eager_execution()

from aif360.datasets import BinaryLabelDataset
from aif360.algorithms.inprocessing import adversarial_debiasing
from aif360.algorithms.inprocessing.adversarial_debiasing import AdversarialDebiasing

from pytest_fmlbench.evalkit import harness_args, write_json

HERE = Path(__file__).resolve().parent
SEED = 233
LABEL, PROTECTED = "two_year_recid", ["sex", "race"]
FAVORABLE, UNFAVORABLE = 0.0, 1.0
PRIVILEGED, UNPRIVILEGED = [{"sex": 1}], [{"sex": 0}]


def dataset(table: pd.DataFrame) -> BinaryLabelDataset:
    return BinaryLabelDataset(df=table, label_names=[LABEL], protected_attribute_names=PROTECTED,
                              favorable_label=FAVORABLE, unfavorable_label=UNFAVORABLE)


def to_predict(inputs: pd.DataFrame) -> BinaryLabelDataset:
    """The rows to label, labels and scores zeroed: predict() cannot hand back what it was given."""
    rows = dataset(inputs.assign(**{LABEL: 0.0}))
    rows.labels = np.zeros_like(rows.labels)
    rows.scores = np.zeros_like(rows.scores)
    return rows


def main() -> None:
    args = harness_args()
    if args.out is None:
        sys.exit("train.py: --out is required")
    editable = HERE / "aif360" / "algorithms" / "inprocessing" / "adversarial_debiasing.py"
    if Path(adversarial_debiasing.__file__).resolve() != editable:
        sys.exit(f"train.py: imported AdversarialDebiasing from {adversarial_debiasing.__file__}, not from {editable}")
    random.seed(SEED)
    np.random.seed(SEED)
    tensorflow.random.set_seed(SEED)
    shuffles = json.loads((HERE / "data" / "shuffles.json").read_text())
    np.random.permutation(shuffles["rows"])  # the original's split of all rows into train and the rest
    np.random.permutation(shuffles["rest"])  # and of the rest into val and test

    train = dataset(pd.read_csv(HERE / "data" / "train.csv", index_col="id"))
    inputs = pd.read_csv(HERE / "data" / "val_inputs.csv" if args.split == "val" else args.out / "test_inputs.csv",
                         index_col="id")
    print(f"train {train.features.shape}, {args.split} {inputs.shape} (features); the hidden test's labels are "
          "not here", flush=True)
    start = time.perf_counter()
    sess = tf.Session()
    sess.close()
    tf.reset_default_graph()
    sess = tf.Session()
    model = AdversarialDebiasing(privileged_groups=PRIVILEGED, unprivileged_groups=UNPRIVILEGED,
                                 scope_name="debiased_classifier", debias=True, sess=sess)
    model.fit(train)
    predicted = model.predict(to_predict(inputs))
    labels = np.asarray(predicted.labels).reshape(-1)
    if labels.shape != (len(inputs),) or not np.isin(labels, (FAVORABLE, UNFAVORABLE)).all():
        sys.exit(f"train.py: predict() must label the {len(inputs)} rows with {FAVORABLE} or {UNFAVORABLE}")
    args.out.mkdir(parents=True, exist_ok=True)
    np.save(args.out / "predictions.npy", labels.astype(np.int8))
    seconds = time.perf_counter() - start
    write_json(args.out / "run_info.json", {"split": args.split, "n_train": int(train.features.shape[0]),
                                            "n_predicted": len(inputs), "seconds": seconds})
    print(f"[{args.split}] trained and predicted {len(inputs)} rows in {seconds:.1f}s", flush=True)


if __name__ == "__main__":
    main()
