"""Materialise the COMPAS-like data of the fairness_and_bias_aif360 task (see compas_like.py).

    --split val   writes the visible pool (features, sex, race, two_year_recid) into
                  WORKSPACE/data/visible.csv and a copy of it into PRIVATE (the evaluator reads only
                  that copy);
    --split test  writes the hidden test rows without two_year_recid into OUT/test_inputs.csv and the
                  full rows into PRIVATE.
Every call writes the same bytes.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compas_like import COLUMNS, LABEL, visible_and_test  # noqa: E402

from pytest_fmlbench.evalkit import harness_args  # noqa: E402


def main() -> None:
    args = harness_args()
    if args.private is None:
        raise SystemExit("prepare.py: --private is required")
    visible, test = visible_and_test()
    args.private.mkdir(parents=True, exist_ok=True)
    if args.split == "val":
        if args.workspace is None:
            raise SystemExit("prepare.py: --workspace is required for --split val")
        data = args.workspace / "data"
        data.mkdir(parents=True, exist_ok=True)
        visible.to_csv(data / "visible.csv", index=False)
        visible.to_csv(args.private / "visible.csv", index=False)
    else:
        if args.out is None:
            raise SystemExit("prepare.py: --out is required for --split test")
        args.out.mkdir(parents=True, exist_ok=True)
        test[COLUMNS].to_csv(args.out / "test_inputs.csv", index=False)
        test[COLUMNS + [LABEL]].to_csv(args.private / "test.csv", index=False)


if __name__ == "__main__":
    main()
