"""Score one few-shot experiment: mean accuracy over the episodes' queries.

OUT/predictions.npy holds the predicted episode labels (0..N_WAY-1) of every query of every episode,
episode after episode, queries in episode order (flattened (n_tasks * N_WAY * N_QUERY,)).
--split val : the evaluator redraws the validation episodes itself (same easyfsl sampler, seed and
              class split as train.py, from the labels in PRIVATE) rather than trusting the experiment.
--split test: the hidden test episodes' query labels come from PRIVATE.
accuracy = correct predictions / all predictions (easyfsl's evaluate(); every episode has as many
queries, so it is also the mean of the episodes' accuracies); its stderr is over episodes.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from pytest_fmlbench.evalkit import fail, harness_args, load_labels, load_split_config, write_result
from pytest_fmlbench.taskkit.few_shot_episodes import (N_QUERY, N_WAY, VAL_SEED, VAL_TASKS, sample_episodes,
                                                       split_classes)

DATASET = "glyphs_features_1shot"


def private_labels(path: Path) -> np.ndarray:
    if not path.is_file():
        fail(f"{path} is missing: run prepare.py first")
    return np.load(path, allow_pickle=False)


def main() -> None:
    args = harness_args()
    for name in ("workspace", "out", "private", "result"):
        if getattr(args, name) is None:
            fail(f"--{name} is required")
    if args.split == "val":
        try:
            split_config = load_split_config(args.workspace)
        except Exception as exc:  # a broken editable split_config.json is the experiment's failure
            fail(f"split_config.json is invalid: {str(exc).splitlines()[0]}")
        labels = private_labels(args.private / "labels.npy")
        _, val_classes = split_classes(labels, split_config)
        if len(val_classes) < N_WAY:
            fail(f"split_config.json leaves {len(val_classes)} validation classes, fewer than {N_WAY}")
        rows = np.flatnonzero(np.isin(labels, val_classes))
        episodes = sample_episodes(np.zeros((len(rows), 1), dtype=np.float32), labels[rows], VAL_TASKS, VAL_SEED)
        query_y = np.stack([e[3].numpy() for e in episodes])
    else:
        query_y = private_labels(args.private / "test_query_y.npy")
    pred = load_labels(args.out / "predictions.npy", query_y.size, N_WAY).reshape(query_y.shape)
    per_episode = (pred == query_y).mean(axis=1)
    accuracy = float((pred == query_y).mean())
    write_result(
        args.result,
        {DATASET: {"accuracy": accuracy}},
        stderrs={DATASET: {"accuracy": float(per_episode.std(ddof=1) / math.sqrt(len(per_episode)))}},
        info={"split": args.split, "n_tasks": int(query_y.shape[0]), "n_way": N_WAY, "n_query": N_QUERY},
    )


if __name__ == "__main__":
    main()
