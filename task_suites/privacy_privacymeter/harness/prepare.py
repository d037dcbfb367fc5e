"""Materialise the data and the auditor's reference models of the privacy_privacymeter task.

    --split val   writes the training set (the audit's members) into WORKSPACE/data/; trains the
                  reference models for the val audit and stores their signals in PRIVATE;
    --split test  trains the reference models for the test audit and stores their signals in PRIVATE.

The reference models of a split are 4 models of the baseline recipe (reference.py), trained in two
complementary pairs on random halves of that split's audit pool (the members and the split's hidden
non-members), as privacy meter trains its models on halves of its dataset; every audited point is thus
outside the training set of exactly two of them. Only their signals (true-label softmax probabilities on
the audit pool and on the population) are kept, in PRIVATE/reference_<split>.npz. Everything is
seeded: every call writes the same bytes.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from noisy_digits import audit_pool, carve  # noqa: E402
from reference import train_reference, true_label_probs  # noqa: E402

from pytest_fmlbench.evalkit import harness_args  # noqa: E402

REFERENCE_SEED = {"val": 31_337, "test": 27_182}
PAIRS = 2


def reference_signals(split: str) -> dict[str, np.ndarray]:
    parts = carve()
    pool, _ = audit_pool(parts, split)
    population = parts["population"]
    rng = np.random.default_rng(REFERENCE_SEED[split])
    trained_on, on_pool, on_population = [], [], []
    for pair in range(PAIRS):
        half = np.zeros(len(pool.y), bool)
        half[rng.permutation(len(pool.y))[: len(pool.y) // 2]] = True
        for side, rows in enumerate((half, ~half)):
            model = train_reference(pool.X[rows], pool.y[rows], seed=REFERENCE_SEED[split] + 2 * pair + side)
            trained_on.append(rows)
            on_pool.append(true_label_probs(model, pool.X, pool.y))
            on_population.append(true_label_probs(model, population.X, population.y))
    return {"trained_on": np.stack(trained_on, 1), "pool": np.stack(on_pool, 1),
            "population": np.stack(on_population, 1)}


def main() -> None:
    args = harness_args()
    if args.private is None:
        raise SystemExit("prepare.py: --private is required")
    torch.set_num_threads(1)  # bit-identical reference models on every run
    args.private.mkdir(parents=True, exist_ok=True)
    if args.split == "val":
        if args.workspace is None:
            raise SystemExit("prepare.py: --workspace is required for --split val")
        members = carve()["members"]
        data = args.workspace / "data"
        data.mkdir(parents=True, exist_ok=True)
        np.save(data / "members_X.npy", members.X)
        np.save(data / "members_y.npy", members.y)
    np.savez(args.private / f"reference_{args.split}.npz", **reference_signals(args.split))


if __name__ == "__main__":
    main()
