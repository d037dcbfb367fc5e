"""Materialise the IHDP-like data of the causality_causalml task (see ihdp_like.py).

    --split val   writes the visible pool (covariates, treatment, one factual outcome y_r per replication)
                  into WORKSPACE/data/visible.csv and the pool's true individual effects, one row per
                  replication, into PRIVATE;
    --split test  writes the hidden test units' covariates (no treatment, no outcome) into OUT and their
                  true effects, one row per replication, into PRIVATE.
The true effects (mu1 - mu0) never reach the workspace or OUT. Every call writes the same bytes.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ihdp_like import visible_and_test  # noqa: E402

from pytest_fmlbench.evalkit import harness_args  # noqa: E402


def main() -> None:
    args = harness_args()
    if args.private is None:
        raise SystemExit("prepare.py: --private is required")
    visible, test, visible_effects, test_effects = visible_and_test()
    covariates = [c for c in test.columns if c != "treatment"]
    args.private.mkdir(parents=True, exist_ok=True)
    if args.split == "val":
        if args.workspace is None:
            raise SystemExit("prepare.py: --workspace is required for --split val")
        data = args.workspace / "data"
        data.mkdir(parents=True, exist_ok=True)
        visible.to_csv(data / "visible.csv", index=False, float_format="%.10g")
        np.save(args.private / "visible_ite.npy", visible_effects)
    else:
        if args.out is None:
            raise SystemExit("prepare.py: --out is required for --split test")
        args.out.mkdir(parents=True, exist_ok=True)
        test[covariates].to_csv(args.out / "test_covariates.csv", index=False, float_format="%.10g")
        np.save(args.private / "test_ite.npy", test_effects)


if __name__ == "__main__":
    main()
