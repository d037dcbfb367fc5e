"""Score one defence against the five backdoors: the original's defense_score, the mean over the
backdoors of the harmonic mean of clean accuracy and resistance (1 - attack success).

For each backdoor i the experiment wrote OUT/predictions{i}.npy; the true labels and which inputs
carry the trigger come from PRIVATE only (for val: the rows of pool i that the workspace's
split_config.json holds out; for test: the hidden test set i). Clean accuracy is measured on the
untriggered inputs, attack success (poison_acc) as the fraction of triggered inputs classified as
the attacker's target. Malformed predictions -> exit 1 with a one-line message.
"""

from __future__ import annotations

import math

import numpy as np

from pytest_fmlbench.evalkit import (
    fail,
    harness_args,
    load_labels,
    load_split_config,
    split_indices,
    write_result,
)

DATASET = "poisoned_digits"
N_BACKDOORS = 5
NUM_CLASSES = 10


def _private(args, name: str) -> np.ndarray:
    path = args.private / name
    if not path.is_file():
        fail(f"{path} is missing: run prepare.py first")
    return np.load(path, allow_pickle=False)


def truth(args, i: int) -> tuple[np.ndarray, np.ndarray]:
    """(labels as poisoned, is_poison) of the inputs the experiment classified for backdoor i."""
    if args.split == "test":
        return _private(args, f"test{i}_y.npy"), _private(args, f"test{i}_is_poison.npy")
    labels, flags = _private(args, f"pool{i}_y.npy"), _private(args, f"pool{i}_is_poison.npy")
    try:
        config = load_split_config(args.workspace)
    except Exception as exc:  # a broken editable split_config.json is the experiment's failure
        fail(f"split_config.json is invalid: {str(exc).splitlines()[0]}")
    _, val_idx = split_indices(len(labels), config)
    return labels[val_idx], flags[val_idx]


def harmonic(clean_acc: float, resist_acc: float) -> float:
    total = clean_acc + resist_acc
    return 0.0 if total == 0 else 2 * clean_acc * resist_acc / total


def main() -> None:
    args = harness_args()
    for name in ("out", "private", "result") + (("workspace",) if args.split == "val" else ()):
        if getattr(args, name) is None:
            fail(f"--{name} is required")
    per_backdoor = []
    for i in range(N_BACKDOORS):
        labels, is_poison = truth(args, i)
        pred = load_labels(args.out / f"predictions{i}.npy", len(labels), NUM_CLASSES)
        correct = pred == labels
        clean_acc = float(correct[~is_poison].mean())
        poison_acc = float(correct[is_poison].mean())
        per_backdoor.append({
            "clean_acc": clean_acc, "poison_acc": poison_acc, "resist_acc": 1 - poison_acc,
            "defense_score": harmonic(clean_acc, 1 - poison_acc),
            "n_clean": int((~is_poison).sum()), "n_poison": int(is_poison.sum()),
        })
    means = {key: float(np.mean([b[key] for b in per_backdoor]))
             for key in ("clean_acc", "poison_acc", "resist_acc", "defense_score")}
    means["defense_score_min"] = float(min(b["defense_score"] for b in per_backdoor))
    # spread over the five backdoors, as a standard error of their mean
    stderrs = {key: float(np.std([b[key] for b in per_backdoor], ddof=1) / math.sqrt(N_BACKDOORS))
               for key in ("clean_acc", "poison_acc", "resist_acc", "defense_score")}
    write_result(
        args.result,
        {DATASET: means},
        stderrs={DATASET: stderrs},
        info={"split": args.split, "per_backdoor": per_backdoor},
    )


if __name__ == "__main__":
    main()
