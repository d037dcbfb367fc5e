"""Score one run: the accuracy of its query predictions over all episodes (labels from PRIVATE only).

Writes the original's results layout, {"miniimagenet_test": {"means": {"accuracy_mean"}}}, as a fraction (the
original's eval.py divides easyfsl's percentage by 100), with the standard error over episodes.
"""

from __future__ import annotations

import numpy as np

from pytest_fmlbench.evalkit import fail, harness_args, load_labels, write_result

DATASET = "miniimagenet_test"
N_WAY = 5


def main() -> None:
    args = harness_args()
    for name in ("out", "private", "result"):
        if getattr(args, name) is None:
            fail(f"--{name} is required")
    labels = np.load(args.private / f"{args.split}_query_labels.npy", allow_pickle=False)
    pred = load_labels(args.out / "predictions.npy", labels.size, N_WAY).reshape(labels.shape)
    correct = pred == labels
    per_episode = correct.mean(axis=1)
    stderr = float(per_episode.std(ddof=1) / np.sqrt(len(per_episode))) if len(per_episode) > 1 else 0.0
    write_result(args.result, {DATASET: {"accuracy_mean": float(correct.mean())}},
                 stderrs={DATASET: {"accuracy_stderr": stderr}},
                 info={"split": args.split, "episodes": int(labels.shape[0]), "queries": int(labels.size)})


if __name__ == "__main__":
    main()
