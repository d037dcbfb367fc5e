"""Score one DomainBed experiment on the OfficeHome-like digit domains (held-out domain: Art).

Both splits score the held-out domain, Art, whose digits are cut into two disjoint parts:
--split val : avg_acc is the accuracy on Art's validation part (OUT/predictions.npy, in the order of
              data/art_val_X.npy): DomainBed's test-domain ("oracle") selection, as the original task validated
              on 30% of Art.
--split test: avg_acc is the accuracy on Art's test part, the other 70% of its digits.
Labels come from PRIVATE only; the predictions are untrusted input, read with allow_pickle=False.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from layout import ART_TEST, ART_VAL, NUM_CLASSES, TEST_ENV  # noqa: E402

from pytest_fmlbench.evalkit import fail, harness_args, load_labels, write_result  # noqa: E402

DATASET = f"OfficeHome_test_env{TEST_ENV}"
METRIC = "avg_acc"


def private_labels(path: Path) -> np.ndarray:
    if not path.is_file():
        fail(f"{path} is missing: run prepare.py first")
    return np.load(path, allow_pickle=False)


def main() -> None:
    args = harness_args()
    for name in ("workspace", "out", "private", "result"):
        if getattr(args, name) is None:
            fail(f"--{name} is required")
    labels_file, part, key = (("art_val_y.npy", ART_VAL, f"env{TEST_ENV}_out_acc") if args.split == "val"
                              else ("test_y.npy", ART_TEST, f"env{TEST_ENV}_in_acc"))
    y = private_labels(args.private / labels_file)
    pred = load_labels(args.out / "predictions.npy", len(y), NUM_CLASSES)
    acc = float(np.mean(pred == y))
    # each digit is drawn several times, so this binomial error understates the sampling error somewhat
    stderr = math.sqrt(acc * (1 - acc) / len(y))
    write_result(args.result, {DATASET: {METRIC: acc, key: acc}}, stderrs={DATASET: {METRIC: stderr}},
                 info={"split": args.split, "held_out_domain": "Art", "part": part, "n_eval": len(y)})


if __name__ == "__main__":
    main()
