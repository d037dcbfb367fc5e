"""Materialise COMPAS for one split, with AIF360's code from the verified checkout and ProPublica's verified
file, both in the data cache ({data}).

The original's protocol (FML-bench's Fairness_and_Bias_aif360): set_seed(233); AIF360's
load_preproc_data_compas() (5,278 defendants, 10 features, sex and race protected); split([0.7], shuffle=True)
into train (3,694) and the rest; the rest split([0.3], shuffle=True) into val (475) and test (1,109). Nothing
the agent edits reaches these cuts.

--split val : the train rows (features and labels) and the val rows' features into WORKSPACE/data/, with the
              sizes of the two shuffles (train.py repeats their draws before training, as the original's
              process does); the val rows with their labels into PRIVATE.
--split test: the test rows' features (no labels) into OUT, the test rows with their labels into PRIVATE.
"""

from __future__ import annotations

import json
import sys

from pytest_fmlbench.evalkit import harness_args
from pytest_fmlbench.taskkit import compas

CHECKOUT = ("aif360", "src")
CSV = ("compas-scores-two-years", "compas-scores-two-years.csv")


def main() -> None:
    args = harness_args()
    if args.private is None or args.data is None:
        sys.exit("prepare.py: --private and --data are required")
    splits, (rows, rest) = compas.original_splits(args.data.joinpath(*CHECKOUT), args.data.joinpath(*CSV))
    args.private.mkdir(parents=True, exist_ok=True)
    if args.split == "val":
        if args.workspace is None:
            sys.exit("prepare.py: --workspace is required for --split val")
        data = args.workspace / "data"
        data.mkdir(parents=True, exist_ok=True)
        splits["train"].to_csv(data / "train.csv")
        splits["val"].drop(columns=[compas.LABEL]).to_csv(data / "val_inputs.csv")
        (data / "shuffles.json").write_text(json.dumps({"rows": rows, "rest": rest}) + "\n")
        splits["val"].to_csv(args.private / "val_truth.csv")
    else:
        if args.out is None:
            sys.exit("prepare.py: --out is required for --split test")
        args.out.mkdir(parents=True, exist_ok=True)
        splits["test"].drop(columns=[compas.LABEL]).to_csv(args.out / "test_inputs.csv")
        splits["test"].to_csv(args.private / "test_truth.csv")


if __name__ == "__main__":
    main()
