"""Score one class-incremental run on Glyphs-100, as PyCIL scores iCaRL: after each session, top-1
accuracy on the scored examples of every class seen so far; avg_incremental_acc is the mean of these
accuracies over the six sessions (B50 + 5 x 10).

Labels come from PRIVATE only; the val examples are recomputed here from split_config.json.
Constraints come from the predictions after every session and from the protected runner's record
(run_info.json): predictions only name classes seen so far, and at most MEMORY_SIZE raw training images
(no scored input) are held between sessions.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from glyph_data import MEMORY_SIZE, NUM_CLASSES, SESSIONS  # noqa: E402

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
    seen_classes_only,
)

DATASET = "glyphs100_incremental"


def memory_budget(record: dict | None) -> ConstraintOutcome:
    train = counts(record, "stored_train_images", len(SESSIONS))
    evals = counts(record, "stored_eval_images", len(SESSIONS))
    if train is None or evals is None:
        return ConstraintOutcome(name="memory_budget", ok=False, limit=float(MEMORY_SIZE),
                                 detail="run_info.json has no per-session memory audit: the run did not finish normally")
    ok = max(train) <= MEMORY_SIZE and max(evals) == 0
    detail = f"raw training images held after each session {train} (budget {MEMORY_SIZE})"
    if max(evals):
        detail += f"; scored inputs held {evals} (none allowed)"
    return ConstraintOutcome(name="memory_budget", ok=ok, value=float(max(train)), limit=float(MEMORY_SIZE),
                             detail=detail)


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

    pred = load_session_predictions(args.out / "predictions.npy", len(SESSIONS), len(labels), NUM_CLASSES)
    seen = [sorted(c for session in SESSIONS[: s + 1] for c in session) for s in range(len(SESSIONS))]
    correct = [(pred[s] == labels)[np.isin(labels, classes)] for s, classes in enumerate(seen)]
    curve = [float(c.mean()) for c in correct]
    # new-class and old-class accuracy after each increment, as PyCIL's "grouped" accuracy reports it
    grouped = [{"old": float(((pred[s] == labels)[np.isin(labels, seen[s - 1])]).mean()),
                "new": float(((pred[s] == labels)[np.isin(labels, SESSIONS[s])]).mean())}
               for s in range(1, len(SESSIONS))]
    record = load_record(args.out / "run_info.json")
    write_result(
        args.result,
        {DATASET: {"avg_incremental_acc": float(np.mean(curve)), "last_acc": curve[-1]}},
        stderrs={DATASET: {"avg_incremental_acc": float(np.sqrt(sum(accuracy_stderr(c) ** 2 for c in correct)))
                           / len(correct)}},
        constraints=[seen_classes_only(pred, seen), memory_budget(record)],
        info={"split": args.split, "n_eval": len(labels), "acc_after_each_session": curve,
              "grouped_after_each_increment": grouped},
    )


if __name__ == "__main__":
    main()
