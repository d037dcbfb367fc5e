"""Experiment driver (protected): episodic few-shot evaluation of few_shot.py's classifier.

    python train.py --split val  --out OUT   the validation episodes (visible classes held out by split_config.json)
    python train.py --split test --out OUT   the hidden test episodes the harness put in OUT

As easyfsl's scripts/benchmark_methods.py with its evaluate(): build the classifier (here with the base
classes' features, for methods that use them), then for each 5-way 1-shot episode process the support
set and score the 15 queries per class. Writes OUT/predictions.npy: the argmax episode labels of every
query, episode after episode (flattened). The evaluator redraws the validation episodes itself.
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path

import numpy as np
import torch

from pytest_fmlbench.evalkit import harness_args, load_split_config, write_json

import few_shot  # the editable method, next to this file
from episodes import N_WAY, VAL_SEED, VAL_TASKS, sample_episodes, split_classes


def test_episodes(out: Path) -> list[tuple]:
    """The hidden test episodes: (support, support_labels, query) built from the arrays in OUT."""
    pool = torch.from_numpy(np.load(out / "test_features.npy"))
    support_idx, support_y, query_idx = (np.load(out / f"test_{name}.npy") for name in ("support_idx", "support_y", "query_idx"))
    return [(pool[s], torch.from_numpy(y), pool[q]) for s, y, q in zip(support_idx, support_y, query_idx)]


def main() -> None:
    args = harness_args()
    if args.out is None:
        sys.exit("train.py: --out is required")
    # one intra-op thread: episodes are tiny, and one thread makes CPU runs bit-reproducible
    torch.set_num_threads(1)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    here = Path(__file__).resolve().parent
    config = few_shot.get_config()
    seed = int(config.get("seed", 0))

    features = np.load(here / "data" / "features.npy")
    labels = np.load(here / "data" / "labels.npy")
    base_classes, val_classes = split_classes(labels, load_split_config(here))
    if len(val_classes) < N_WAY:
        sys.exit(f"train.py: split_config.json leaves {len(val_classes)} validation classes, fewer than {N_WAY}")
    base = np.isin(labels, base_classes)
    if args.split == "val":
        rows = np.flatnonzero(np.isin(labels, val_classes))
        drawn = sample_episodes(features[rows], labels[rows], VAL_TASKS, VAL_SEED)
        episodes, query_labels = [e[:3] for e in drawn], [e[3] for e in drawn]
    else:
        episodes = test_episodes(args.out)

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    started = time.perf_counter()
    model = few_shot.build_classifier(torch.from_numpy(features[base]).to(device),
                                      torch.from_numpy(labels[base]).to(device), config).to(device)
    model.eval()
    predictions = []
    with torch.no_grad():
        for support, support_labels, query in episodes:
            model.process_support_set(support.to(device), support_labels.to(device))
            predictions.append(model(query.to(device)).argmax(dim=1).cpu())
    predictions = torch.stack(predictions).numpy().astype(np.int64)
    if args.split == "val":  # a diagnostic only; the score comes from the evaluator
        print(f"val accuracy (diagnostic) {np.mean(predictions == torch.stack(query_labels).numpy()):.4f}")
    args.out.mkdir(parents=True, exist_ok=True)
    np.save(args.out / "predictions.npy", predictions.ravel())
    write_json(args.out / "run_info.json", {"episodes": len(episodes), "device": device,
                                            "seconds": time.perf_counter() - started})


if __name__ == "__main__":
    main()
