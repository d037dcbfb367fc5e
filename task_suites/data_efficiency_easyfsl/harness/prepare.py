"""Materialise the few-shot data for one split.

--split val : the visible classes' features and class labels into WORKSPACE/data/ (base classes and
              validation classes alike: split_config.json decides which is which), a copy of the labels
              into PRIVATE (the evaluator never reads labels from the workspace).
--split test: the hidden test classes' features, in a hidden random order, into OUT/test_features.npy,
              and the hidden test episodes drawn from them with easyfsl's TaskSampler: support rows and
              labels (OUT/test_support_idx.npy, OUT/test_support_y.npy) and query rows
              (OUT/test_query_idx.npy); the query labels into PRIVATE only.
Output is byte-for-byte deterministic.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from glyphs import N_CLASSES, N_TEST_CLASSES, SEED, features  # noqa: E402

from pytest_fmlbench.evalkit import harness_args  # noqa: E402

TEST_TASKS = 1000  # as the original's benchmark_methods.py
TEST_SEED = SEED + 43  # the original drew its test episodes with a seed (43) other than validation's (42)


def main() -> None:
    args = harness_args()
    if args.private is None:
        sys.exit("prepare.py: --private is required")
    args.private.mkdir(parents=True, exist_ok=True)
    if args.split == "val":
        if args.workspace is None:
            sys.exit("prepare.py: --workspace is required for --split val")
        X, classes = features(range(N_TEST_CLASSES, N_CLASSES))
        labels = classes - N_TEST_CLASSES  # the visible classes as 0..79
        data = args.workspace / "data"
        data.mkdir(parents=True, exist_ok=True)
        np.save(data / "features.npy", X)
        np.save(data / "labels.npy", labels)
        np.save(args.private / "labels.npy", labels)
    else:
        if args.out is None:
            sys.exit("prepare.py: --out is required for --split test")
        # imported here: easyfsl's sampler pulls in torchvision, which the val split does not need
        from pytest_fmlbench.taskkit.few_shot_episodes import N_QUERY, N_SHOT, N_WAY, sample_episodes

        X, classes = features(range(N_TEST_CLASSES))
        # shuffled, so that a row's position says nothing about its class
        order = np.random.default_rng(TEST_SEED).permutation(len(classes))
        X, classes = X[order], classes[order]
        rows = np.arange(len(classes))[:, None]
        episodes = sample_episodes(rows, classes, TEST_TASKS, TEST_SEED)
        support_idx = np.stack([e[0].numpy().ravel() for e in episodes])
        support_y = np.stack([e[1].numpy() for e in episodes])
        query_idx = np.stack([e[2].numpy().ravel() for e in episodes])
        query_y = np.stack([e[3].numpy() for e in episodes])
        assert support_idx.shape == (TEST_TASKS, N_WAY * N_SHOT) and query_idx.shape == (TEST_TASKS, N_WAY * N_QUERY)
        args.out.mkdir(parents=True, exist_ok=True)
        np.save(args.out / "test_features.npy", X)
        np.save(args.out / "test_support_idx.npy", support_idx.astype(np.int64))
        np.save(args.out / "test_support_y.npy", support_y.astype(np.int64))
        np.save(args.out / "test_query_idx.npy", query_idx.astype(np.int64))
        np.save(args.private / "test_query_y.npy", query_y.astype(np.int64))


if __name__ == "__main__":
    main()
