"""Materialise IHDP (replication 3, as causalml ships it) for one split, from the verified checkout of causalml
at the commit FML-bench pins ({data}/causalml/src/docs/examples/data/ihdp_npci_3.csv).

The original's protocol: 747 units; the true effect of each is the difference of its two simulated outcomes
(y_factual - y_cfactual for the treated, the reverse for the controls); a hidden test of 21% (157 units) is
carved first with scikit-learn's train_test_split(random_state=42); the other 590 are the visible pool, in
that split's order.

--split val : the visible pool's treatment, factual outcome and 25 covariates into WORKSPACE/data/visible.csv;
              its true effects (and treatment and outcome, for the evaluator) into PRIVATE.
--split test: the hidden units' covariates only into OUT/test_covariates.csv; their effects, treatment and
              outcome into PRIVATE.
"""

from __future__ import annotations

import sys

import numpy as np

from pytest_fmlbench.evalkit import harness_args
from pytest_fmlbench.taskkit import ihdp

CSV = ("causalml", "src", "docs", "examples", "data", "ihdp_npci_3.csv")


def main() -> None:
    args = harness_args()
    if args.private is None or args.data is None:
        sys.exit("prepare.py: --private and --data are required")
    units = ihdp.read(args.data.joinpath(*CSV))
    test_pos, visible_pos = ihdp.hidden_test(len(units))
    args.private.mkdir(parents=True, exist_ok=True)
    if args.split == "val":
        if args.workspace is None:
            sys.exit("prepare.py: --workspace is required for --split val")
        visible = units.iloc[visible_pos].reset_index(drop=True)
        data = args.workspace / "data"
        data.mkdir(parents=True, exist_ok=True)
        visible[["treatment", "y_factual", *ihdp.COVARIATES]].to_csv(data / "visible.csv", index=False)
        for column in ("tau", "treatment", "y_factual"):
            np.save(args.private / f"visible_{column}.npy", visible[column].to_numpy())
    else:
        if args.out is None:
            sys.exit("prepare.py: --out is required for --split test")
        hidden = units.iloc[test_pos].reset_index(drop=True)
        args.out.mkdir(parents=True, exist_ok=True)
        hidden[ihdp.COVARIATES].to_csv(args.out / "test_covariates.csv", index=False)
        for column in ("tau", "treatment", "y_factual"):
            np.save(args.private / f"test_{column}.npy", hidden[column].to_numpy())


if __name__ == "__main__":
    main()
