"""Materialise the episodes of one split from the verified artefacts in the data cache ({data}).

The original's protocol (FML-bench's eval.py over easyfsl's scripts.benchmark_methods, prototypical_networks,
--config=default --n-shot=1): FEAT's ResNet-12 features of the 20 mini-ImageNet test classes (12,000 images),
1,000 episodes of 5 ways, 1 shot and 15 queries per class drawn by easyfsl's TaskSampler after seeding with 42
for validation and 43 for the test. Both splits draw from the same pool of features, as the original's do.

--split val : the pool (features only) and the validation episodes (support indices and labels, query indices)
              into WORKSPACE/data/; the validation queries' labels into PRIVATE.
--split test: the test episodes into OUT, their queries' labels into PRIVATE.
"""

from __future__ import annotations

import sys

import numpy as np

from pytest_fmlbench.evalkit import harness_args
from pytest_fmlbench.taskkit import mini_imagenet

SEEDS = {"val": 42, "test": 43}
N_WAY, N_SHOT = 5, 1
# (queries per class, episodes): the original's, and a few small episodes on the smoke fixture's 5 images a class
SCALES = {"full": (15, 1000), "smoke": (3, 4)}


def main() -> None:
    args = harness_args()
    if args.private is None or args.data is None:
        sys.exit("prepare.py: --private and --data are required")
    try:
        embeddings, labels = mini_imagenet.cached_features(args.data)
    except mini_imagenet.DataProblem as exc:
        # the archive was pinned as it arrived (no checksum is published): other bytes need a new pin
        again = (f"; to fetch it anew, delete {args.data / mini_imagenet.ARCHIVE[0]} and run "
                 "`fmlbench data fetch -k data_efficiency_easyfsl_full --pin-unpublished`") if args.scale == "full" else ""
        sys.exit(f"prepare.py: {exc}{again}")
    n_query, n_tasks = SCALES[args.scale]
    episodes = mini_imagenet.draw_episodes(embeddings, labels, args.data.joinpath(*mini_imagenet.CHECKOUT),
                                           seed=SEEDS[args.split], n_way=N_WAY, n_shot=N_SHOT, n_query=n_query,
                                           n_tasks=n_tasks)
    visible = {name: episodes[name] for name in ("support", "support_labels", "query")}
    args.private.mkdir(parents=True, exist_ok=True)
    np.save(args.private / f"{args.split}_query_labels.npy", episodes["query_labels"])
    if args.split == "val":
        if args.workspace is None:
            sys.exit("prepare.py: --workspace is required for --split val")
        data = args.workspace / "data"
        data.mkdir(parents=True, exist_ok=True)
        np.save(data / "features.npy", embeddings)
        np.savez(data / "val_episodes.npz", **visible)
    else:
        if args.out is None:
            sys.exit("prepare.py: --out is required for --split test")
        args.out.mkdir(parents=True, exist_ok=True)
        np.savez(args.out / "test_episodes.npz", **visible)


if __name__ == "__main__":
    main()
