"""Score one class-incremental run on split digits: average_acc, the accuracy after the last context
averaged over the five contexts (each context's eval examples scored over all ten classes), as the
original computes it.

Labels come from PRIVATE only; the val examples are recomputed here from split_config.json. The
constraints are checked from the predictions after every context and from the protected runner's
record (run_info.json): predictions only name classes seen so far, no raw training image is kept
between contexts (the original's "no replay buffer" rule), and the learner's torch modules hold at
most twice the baseline's parameters.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cl_data import CONTEXTS, MAX_PARAMETERS, NUM_CLASSES  # noqa: E402

from pytest_fmlbench.evalkit import (  # noqa: E402
    ConstraintOutcome,
    fail,
    harness_args,
    load_split_config,
    split_indices,
    write_result,
)
from pytest_fmlbench.taskkit.class_incremental import (  # noqa: E402
    accuracy_stderr,
    counts,
    load_record,
    load_session_predictions,
    parameter_cap,
    seen_classes_only,
)

DATASET = "split_digits_class_il"


def no_stored_samples(record: dict | None) -> ConstraintOutcome:
    train = counts(record, "stored_train_images", len(CONTEXTS))
    evals = counts(record, "stored_eval_images", len(CONTEXTS))
    if train is None or evals is None:
        return ConstraintOutcome(name="no_stored_samples", ok=False,
                                 detail="run_info.json has no per-context memory audit: the run did not finish normally")
    worst = max(max(train), max(evals))
    detail = (f"raw images held after each context: training {train}, scored inputs {evals}"
              if worst else "no raw image held between contexts")
    return ConstraintOutcome(name="no_stored_samples", ok=worst == 0, value=float(worst), limit=0.0, detail=detail)


def main() -> None:
    args = harness_args()
    for name in ("workspace", "out", "private", "result"):
        if getattr(args, name) is None:
            fail(f"--{name} is required")
    if args.split == "val":
        path = args.private / "visible_y.npy"
        if not path.is_file():
            fail(f"{path} is missing: run prepare.py --split val first")
        visible_y = np.load(path, allow_pickle=False)
        try:
            split_config = load_split_config(args.workspace)
        except Exception as exc:  # a broken editable split_config.json is the experiment's failure
            fail(f"split_config.json is invalid: {str(exc).splitlines()[0]}")
        labels = visible_y[split_indices(len(visible_y), split_config)[1]]
    else:
        path = args.private / "test_y.npy"
        if not path.is_file():
            fail(f"{path} is missing: run prepare.py --split test first")
        labels = np.load(path, allow_pickle=False)

    pred = load_session_predictions(args.out / "predictions.npy", len(CONTEXTS), len(labels), NUM_CLASSES)
    seen = [sorted(c for ctx in CONTEXTS[: s + 1] for c in ctx) for s in range(len(CONTEXTS))]

    def context_accuracy(row: np.ndarray, ctx: tuple[int, ...]) -> np.ndarray:
        mask = np.isin(labels, ctx)
        return row[mask] == labels[mask]

    final = [context_accuracy(pred[-1], ctx) for ctx in CONTEXTS]
    average_acc = float(np.mean([c.mean() for c in final]))
    # the original's learning curve: after each context, the average over the contexts seen so far
    curve = [float(np.mean([context_accuracy(pred[s], ctx).mean() for ctx in CONTEXTS[: s + 1]]))
             for s in range(len(CONTEXTS))]
    record = load_record(args.out / "run_info.json")
    write_result(
        args.result,
        {DATASET: {"average_acc": average_acc}},
        stderrs={DATASET: {"average_acc": float(np.sqrt(sum(accuracy_stderr(c) ** 2 for c in final))) / len(final)}},
        constraints=[seen_classes_only(pred, seen), no_stored_samples(record), parameter_cap(record, MAX_PARAMETERS)],
        info={"split": args.split, "n_eval": len(labels),
              "acc_per_context_after_last": [float(c.mean()) for c in final],
              "average_acc_after_each_context": curve},
    )


if __name__ == "__main__":
    main()
