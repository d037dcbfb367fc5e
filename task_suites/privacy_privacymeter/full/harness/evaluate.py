"""Audit the experiment's models with RMIA, as privacy meter does, and measure their utility; nothing the
experiment reports is trusted.

The experiment exports four target models (OUT/model_<k>/, k = 0..3), the original's four: the graphs
train.py exported, which aten_graph.py loads and runs without running any of the experiment's code. As
the original's postprocess.py, the val audit attacks target 1 and the test audit targets 0, 2 and 3
(protocol.audited_targets), each on the split's 10,000 audited points (5,000 members, 5,000
non-members). The evaluator queries every target on the split's audited points, the population (CIFAR-10's
test images) and all non-members, in a shuffled order; pairs each audited target's true-label
probabilities with those of the harness's own models (PRIVATE/reference.npz: the targets' pair and the
reference pair); tunes RMIA's offline a on the pair and attacks the target with one reference model
(rmia.py); and reports the original's results: AUC_gap_mean = |mean AUC - 0.5| over the split's targets
(lower is better), TPR@0.1%FPR_mean and TPR@0.0%FPR_mean (their means) and test_acc_mean (the mean over
all four targets of the accuracy on all non-members, on both splits).

Constraints, the original's (postprocess.py), on those means: on val, TPR at 0.1% and at 0% FPR must stay
at the baseline's 0.0 and test_acc at or above 0.610; on the test, TPR@0.1%FPR <= 0.02, TPR@0.0%FPR <=
0.005 and test_acc >= 0.600. At --scale=smoke, which checks the code path and never a result, they are
reported but not binding.
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
from protocol import SEED, TARGETS, audited_targets, carve, read_cifar10  # noqa: E402
from reference import logits, true_label_probability  # noqa: E402

from pytest_fmlbench.evalkit import ConstraintOutcome, fail, harness_args, write_result  # noqa: E402

DATASET = "cifar10"
TARGET = 0  # the signal matrices' first column; its pair is column 1, the reference pair columns 2 and 3
ATTACK_KEYS = ("AUC", "TPR@0.1%FPR", "TPR@0.0%FPR")
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
    """The original's checks on the split's means: ``attack`` the mean TPRs over its targets, ``accuracy`` the
    mean over all four targets."""
    tpr01, tpr0, floor = LIMITS[split] if scale == "full" else NOT_BINDING
    full01, full0, full_floor = LIMITS[split]
    leak_note, floor_note = ("", "") if scale == "full" else (
        f" (smoke scale: not binding; at full scale <= {full01} and <= {full0})",
        f" (smoke scale: not binding; at full scale >= {full_floor})")
    return [
        ConstraintOutcome(name="low_fpr_leakage", ok=attack["TPR@0.1%FPR"] <= tpr01 and attack["TPR@0.0%FPR"] <= tpr0,
                          value=attack["TPR@0.1%FPR"], limit=tpr01,
                          detail=f"TPR@0.1%FPR_mean {attack['TPR@0.1%FPR']:.4f} must be <= {tpr01} and "
                                 f"TPR@0.0%FPR_mean {attack['TPR@0.0%FPR']:.4f} <= {tpr0}{leak_note}"),
        ConstraintOutcome(name="utility_floor", ok=accuracy >= floor, value=accuracy, limit=floor,
                          detail=f"test_acc_mean {accuracy:.4f} must be >= {floor}{floor_note}"),
    ]


def split_means(attacks: list[dict[str, float]], accuracies: list[float]) -> dict[str, float]:
    """postprocess.py's summary: the attack's numbers averaged over the split's targets, AUC_gap_mean the gap of
    the mean AUC, and test_acc_mean over every target (the same on val and test)."""
    means = {key: float(np.mean([attack[key] for attack in attacks])) for key in ATTACK_KEYS}
    return {"AUC_gap_mean": abs(means["AUC"] - 0.5), "TPR@0.1%FPR_mean": means["TPR@0.1%FPR"],
            "TPR@0.0%FPR_mean": means["TPR@0.0%FPR"], "test_acc_mean": float(np.mean(accuracies)), "AUC": means["AUC"]}


def load_targets(out: Path, device: torch.device) -> list[AuditedModel]:
    targets = []
    for target in range(TARGETS):
        try:
            targets.append(AuditedModel(out / f"model_{target}", device))
        except GraphError as exc:
            fail(f"target model {target}'s export cannot be audited: {exc}")
    return targets


def main() -> None:
    args = harness_args()
    for name in ("out", "private", "result", "data"):
        if getattr(args, name) is None:
            fail(f"--{name} is required")
    device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    targets = load_targets(args.out, device)
    images, labels, population, population_labels = read_cifar10(args.data)
    carving = carve(len(labels), args.scale)
    pool = carving.pools[args.split]
    asked = np.concatenate([pool, carving.non_members])
    reference_file = args.private / "reference.npz"
    if not reference_file.is_file():
        fail(f"{reference_file} is missing: run prepare.py first")
    with np.load(reference_file, allow_pickle=False) as stored:
        row = {int(index): position for position, index in enumerate(stored["audited"])}
        theirs, theirs_population = stored["signals"][[row[int(i)] for i in pool]], stored["population"]
    trained_on = carving.trained_on(len(labels))[pool]
    # every target is asked the same questions: nothing in them says which split audits it
    questions = np.concatenate([images[asked], population])
    audited, accuracies, attacks, offline_a = audited_targets(args.split), [], [], None
    for target, model in enumerate(targets):
        try:
            answers = query(model, questions, device)
        except GraphError as exc:
            fail(f"target model {target} cannot be audited: {exc}")
        on_pool, on_non_members = answers[:len(pool)], answers[len(pool):len(asked)]
        on_population = answers[len(asked):]
        accuracies.append(float((on_non_members.argmax(dim=1).numpy() == labels[carving.non_members]).mean()))
        if target not in audited:
            continue
        signals = np.column_stack([true_label_probability(on_pool, labels[pool]), theirs])
        population_signals = np.column_stack([true_label_probability(on_population, population_labels),
                                              theirs_population])
        if offline_a is None:  # tuned on the pair and the reference pair, the harness's: the same for every target
            offline_a = rmia.tune_offline_a(TARGET, signals, population_signals, trained_on)
        scores = rmia.run_rmia(TARGET, signals, population_signals, trained_on, 1, offline_a)
        attacks.append(rmia.attack_results(scores, trained_on[:, TARGET]))
    means = split_means(attacks, accuracies)
    write_result(
        args.result,
        {DATASET: {**means, "offline_a": float(offline_a)}},
        # the original reports 0.0; the spread of the four targets' accuracies says more
        stderrs={DATASET: {"test_acc_stderr": float(np.std(accuracies, ddof=1) / math.sqrt(len(accuracies)))}},
        constraints=constraints(args.split, args.scale, {key: means[f"{key}_mean"] for key in ATTACK_KEYS[1:]},
                                means["test_acc_mean"]),
        info={"split": args.split, "scale": args.scale, "audited_targets": list(audited),
              **{f"{key}_per_target": [attack[key] for attack in attacks] for key in ATTACK_KEYS},
              "test_acc_per_target": accuracies,
              "audited_members": int(trained_on[:, TARGET].sum()),
              "audited_non_members": int((~trained_on[:, TARGET]).sum()), "population": len(population_labels),
              "non_members_for_accuracy": len(carving.non_members)},
    )


if __name__ == "__main__":
    main()
