"""Score one defence against the five backdoors: the original's defense_score, per backdoor the harmonic
mean of clean accuracy and resistance (1 - attack success), averaged over the five.

For backdoor i the experiment wrote OUT/predictions{i}.npy; the labels and the poison marks come from
PRIVATE only (val: the rows of pool i that the workspace's split_config.json holds out; test: hidden test
set i). Clean accuracy is over the untriggered images, attack success (poison_acc) is the fraction of
triggered images classified as the attacker's target. Writes the original's results layout:
{"poisoned_mnist": {"means": {clean_acc_mean, poison_acc_mean, resist_acc_mean, defense_score_mean}}}
with the worst backdoor and the per-backdoor values in the verdict's info.
"""

from __future__ import annotations

import numpy as np

from pytest_fmlbench.evalkit import (
    fail,
    harness_args,
    load_labels,
    load_split_config,
    original_split_indices,
    write_result,
)

DATASET = "poisoned_mnist"
BACKDOORS = ("pattern", "distributed", "edge", "random_corner", "pattern_topleft")
NUM_CLASSES = 10
KEYS = ("clean_acc", "poison_acc", "resist_acc", "defense_score")


def _private(args, name: str) -> np.ndarray:
    path = args.private / name
    if not path.is_file():
        fail(f"{path} is missing: run prepare.py first")
    return np.load(path, allow_pickle=False)


def truth(args, i: int) -> tuple[np.ndarray, np.ndarray]:
    """(labels as poisoned, is_poison) of the images the experiment classified for backdoor i."""
    if args.split == "test":
        return _private(args, f"test{i}_y.npy"), _private(args, f"test{i}_is_poison.npy")
    labels, flags = _private(args, f"pool{i}_y.npy"), _private(args, f"pool{i}_is_poison.npy")
    try:
        config = load_split_config(args.workspace)
    except Exception as exc:  # a broken editable split_config.json is the experiment's failure
        fail(f"split_config.json is invalid: {str(exc).splitlines()[0]}")
    _, val_pos = original_split_indices(len(labels), config)
    return labels[val_pos], flags[val_pos]


def harmonic(clean_acc: float, resist_acc: float) -> float:
    total = clean_acc + resist_acc
    return 0.0 if total == 0 else 2 * clean_acc * resist_acc / total


def main() -> None:
    args = harness_args()
    for name in ("out", "private", "result") + (("workspace",) if args.split == "val" else ()):
        if getattr(args, name) is None:
            fail(f"--{name} is required")
    per_backdoor = []
    for i, name in enumerate(BACKDOORS):
        labels, is_poison = truth(args, i)
        if is_poison.all() or not is_poison.any():
            fail(f"backdoor {name}: the evaluated images hold no {'clean' if is_poison.all() else 'poisoned'} one")
        correct = load_labels(args.out / f"predictions{i}.npy", len(labels), NUM_CLASSES) == labels
        clean_acc, poison_acc = float(correct[~is_poison].mean()), float(correct[is_poison].mean())
        per_backdoor.append({"backdoor_type": name, "clean_acc": clean_acc, "poison_acc": poison_acc,
                             "resist_acc": 1 - poison_acc, "defense_score": harmonic(clean_acc, 1 - poison_acc),
                             "n_clean": int((~is_poison).sum()), "n_poison": int(is_poison.sum())})
    means = {f"{key}_mean": float(np.mean([b[key] for b in per_backdoor])) for key in KEYS}
    worst = {"defense_score_min": min(b["defense_score"] for b in per_backdoor),
             "clean_acc_min": min(b["clean_acc"] for b in per_backdoor),
             "poison_acc_max": max(b["poison_acc"] for b in per_backdoor)}
    write_result(
        args.result,
        {DATASET: means},
        # the original reports zeros here: one run per backdoor, no repeats
        stderrs={DATASET: {f"{key}_stderr": 0.0 for key in KEYS}},
        info={"split": args.split, "worst_case": worst, "per_backdoor_results": per_backdoor},
    )


if __name__ == "__main__":
    main()
