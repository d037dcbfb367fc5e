"""Audit the experiment's model with RMIA, as privacy meter does, and measure its utility; nothing the
experiment reports is trusted.

The model is the graph train.py exported (aten_graph.py loads and runs it without running any of the
experiment's code). The evaluator queries it on the split's audited points (5,000 members and 5,000
non-members), the population (CIFAR-10's test images) and all non-members, in a shuffled order; pairs its
true-label probabilities with those of the harness's own models (PRIVATE/reference.npz: the target's pair
and the reference pair); tunes RMIA's offline a on the pair and attacks the target with one reference
model (rmia.py); and reports the original's results: AUC_gap_mean = |AUC - 0.5| (lower is better),
TPR@0.1%FPR_mean, TPR@0.0%FPR_mean and test_acc_mean (accuracy on all non-members).

Constraints, the original's (postprocess.py): on val, TPR at 0.1% and at 0% FPR must stay at the
baseline's 0.0 and test_acc at or above 0.610; on the test, TPR@0.1%FPR <= 0.02, TPR@0.0%FPR <= 0.005 and
test_acc >= 0.600. At --scale=smoke, which checks the code path and never a result, they are reported
but not binding.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import rmia  # noqa: E402
from aten_graph import AuditedModel, GraphError  # noqa: E402
from protocol import SEED, carve, read_cifar10  # noqa: E402
from reference import logits, true_label_probability  # noqa: E402

from pytest_fmlbench.evalkit import ConstraintOutcome, fail, harness_args, write_result  # noqa: E402

DATASET = "cifar10"
TARGET = 0  # the signal matrices' first column; its pair is column 1, the reference pair columns 2 and 3
LIMITS = {  # (TPR@0.1%FPR at most, TPR@0.0%FPR at most, test_acc at least)
    "val": (0.0, 0.0, 0.610),
    "test": (0.02, 0.005, 0.600),
}
NOT_BINDING = (1.0, 1.0, 0.0)


def query(model: AuditedModel, images: np.ndarray, device: torch.device) -> torch.Tensor:
    """The model's logits on ``images``, asked in a shuffled order so that nothing follows from a position."""
    order = np.random.default_rng(SEED + 1).permutation(len(images))
    answers = logits(model, images[order], device, model.batch_size)
    restored = torch.empty_like(answers)
    restored[torch.from_numpy(order)] = answers
    if not torch.isfinite(restored).all():
        fail("the model's logits are not all finite")
    return restored


def constraints(split: str, scale: str, attack: dict[str, float], accuracy: float) -> list[ConstraintOutcome]:
    tpr01, tpr0, floor = LIMITS[split] if scale == "full" else NOT_BINDING
    full01, full0, full_floor = LIMITS[split]
    leak_note, floor_note = ("", "") if scale == "full" else (
        f" (smoke scale: not binding; at full scale <= {full01} and <= {full0})",
        f" (smoke scale: not binding; at full scale >= {full_floor})")
    return [
        ConstraintOutcome(name="low_fpr_leakage", ok=attack["TPR@0.1%FPR"] <= tpr01 and attack["TPR@0.0%FPR"] <= tpr0,
                          value=attack["TPR@0.1%FPR"], limit=tpr01,
                          detail=f"TPR@0.1%FPR {attack['TPR@0.1%FPR']:.4f} must be <= {tpr01} and TPR@0.0%FPR "
                                 f"{attack['TPR@0.0%FPR']:.4f} <= {tpr0}{leak_note}"),
        ConstraintOutcome(name="utility_floor", ok=accuracy >= floor, value=accuracy, limit=floor,
                          detail=f"test_acc {accuracy:.4f} must be >= {floor}{floor_note}"),
    ]


def main() -> None:
    args = harness_args()
    for name in ("out", "private", "result", "data"):
        if getattr(args, name) is None:
            fail(f"--{name} is required")
    device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    try:
        model = AuditedModel(args.out, device)
    except GraphError as exc:
        fail(f"the exported model cannot be audited: {exc}")
    images, labels, population, population_labels = read_cifar10(args.data)
    carving = carve(len(labels), args.scale)
    pool = carving.pools[args.split]
    asked = np.concatenate([pool, carving.non_members])
    try:
        answers = query(model, np.concatenate([images[asked], population]), device)
    except GraphError as exc:
        fail(f"the exported model cannot be audited: {exc}")
    on_pool, on_non_members, on_population = answers[:len(pool)], answers[len(pool):len(asked)], answers[len(asked):]

    reference_file = args.private / "reference.npz"
    if not reference_file.is_file():
        fail(f"{reference_file} is missing: run prepare.py first")
    with np.load(reference_file, allow_pickle=False) as stored:
        row = {int(index): position for position, index in enumerate(stored["audited"])}
        theirs, theirs_population = stored["signals"][[row[int(i)] for i in pool]], stored["population"]
    signals = np.column_stack([true_label_probability(on_pool, labels[pool]), theirs])
    population_signals = np.column_stack([true_label_probability(on_population, population_labels), theirs_population])
    trained_on = carving.trained_on(len(labels))[pool]

    offline_a = rmia.tune_offline_a(TARGET, signals, population_signals, trained_on)
    scores = rmia.run_rmia(TARGET, signals, population_signals, trained_on, 1, offline_a)
    attack = rmia.attack_results(scores, trained_on[:, TARGET])
    accuracy = float((on_non_members.argmax(dim=1).numpy() == labels[carving.non_members]).mean())
    n_non = len(carving.non_members)
    write_result(
        args.result,
        {DATASET: {"AUC_gap_mean": abs(attack["AUC"] - 0.5), "TPR@0.1%FPR_mean": attack["TPR@0.1%FPR"],
                   "TPR@0.0%FPR_mean": attack["TPR@0.0%FPR"], "test_acc_mean": accuracy, "AUC": attack["AUC"],
                   "offline_a": float(offline_a)}},
        stderrs={DATASET: {"test_acc_stderr": math.sqrt(accuracy * (1 - accuracy) / n_non)}},
        constraints=constraints(args.split, args.scale, attack, accuracy),
        info={"split": args.split, "scale": args.scale, "audited_members": int(trained_on[:, TARGET].sum()),
              "audited_non_members": int((~trained_on[:, TARGET]).sum()), "population": len(population_labels),
              "non_members_for_accuracy": n_non},
    )


if __name__ == "__main__":
    main()
