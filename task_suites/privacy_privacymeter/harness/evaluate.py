"""Audit the experiment's model with RMIA and measure its utility; nothing it reports is trusted.

The experiment leaves OUT/model_spec.json (an architecture of architecture.py's family) and OUT/model.pt
(a state dict). Both are untrusted: only regular files of bounded size are read, the spec is validated,
the weights are loaded with torch.load(weights_only=True) (plain tensors, no code) into the network
that this module builds from the kit's digit_convnets (of which architecture.py is a copy), strictly,
with every name, shape and dtype checked and every value finite. The evaluator then queries the model itself on the split's audit
pool (the members and the split's hidden non-members) and on the hidden population, runs offline RMIA
(rmia.py) with the reference signals prepare.py stored in PRIVATE, and computes the original's metric
AUC_gap = |AUC - 0.5| (lower is better), with AUC, TPR@0.1%FPR, TPR@0.0%FPR and the utility test_acc
(accuracy on the split's hidden non-members).

Constraint "utility_floor", as in the original: test_acc must not fall below the baseline's val
accuracy on val, and not more than 0.01 below it on the hidden test.
"""

from __future__ import annotations

import math
import sys
import warnings
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import rmia  # noqa: E402
from noisy_digits import audit_pool, carve  # noqa: E402
from reference import true_label_probs  # noqa: E402

from pytest_fmlbench.evalkit import ConstraintOutcome, fail, harness_args, write_result  # noqa: E402
from pytest_fmlbench.taskkit.digit_convnets import ArchitectureSpec, build  # noqa: E402

DATASET = "noisy_digits"
BASELINE_VAL_ACCURACY = 215 / 350  # the baseline's val accuracy: 215 of the 350 val non-members
TEST_TOLERANCE = 0.01
MAX_SPEC_BYTES = 4096
MAX_WEIGHT_BYTES = 64 << 20
PROXY, HELPERS = 0, [2, 3]  # offline a is tuned by attacking reference 0 with the other pair


def _regular_file(path: Path, limit: int) -> Path:
    if path.is_symlink() or not path.is_file():
        fail(f"{path.name} is missing or not a regular file")
    if path.stat().st_size > limit:
        fail(f"{path.name} is larger than {limit} bytes")
    return path


def load_model(out: Path) -> tuple[ArchitectureSpec, torch.nn.Module]:
    try:
        spec = ArchitectureSpec.model_validate_json(_regular_file(out / "model_spec.json", MAX_SPEC_BYTES).read_text())
    except ValueError as exc:
        fail(f"model_spec.json is not a valid architecture spec: {str(exc).splitlines()[0]}")
    model = build(spec)
    expected = model.state_dict()
    try:
        with warnings.catch_warnings():  # torch's note on the pickle protocol only adds noise
            warnings.simplefilter("ignore")
            weights = torch.load(_regular_file(out / "model.pt", MAX_WEIGHT_BYTES), map_location="cpu",
                                 weights_only=True)
    except Exception:  # weights_only refuses anything but tensors and plain containers
        fail("model.pt cannot be loaded with torch.load(weights_only=True): save a state dict of tensors")
    if not isinstance(weights, dict) or set(weights) != set(expected):
        fail("model.pt is not a state dict of the network its model_spec.json describes")
    for name, tensor in weights.items():
        if not isinstance(tensor, torch.Tensor) or tensor.shape != expected[name].shape or tensor.dtype != expected[name].dtype:
            fail(f"model.pt: {name} is not a {expected[name].dtype} tensor of shape {tuple(expected[name].shape)}")
        if tensor.is_floating_point() and not torch.isfinite(tensor).all():
            fail(f"model.pt: {name} has non-finite values")
    model.load_state_dict(weights, strict=True)
    return spec, model.eval()


def main() -> None:
    args = harness_args()
    for name in ("out", "private", "result"):
        if getattr(args, name) is None:
            fail(f"--{name} is required")
    torch.set_num_threads(1)
    spec, model = load_model(args.out)
    reference_file = args.private / f"reference_{args.split}.npz"
    if not reference_file.is_file():
        fail(f"{reference_file} is missing: run prepare.py --split {args.split} first")
    with np.load(reference_file, allow_pickle=False) as stored:
        ref_pool, ref_population, trained_on = stored["pool"], stored["population"], stored["trained_on"]
    parts = carve()
    pool, membership = audit_pool(parts, args.split)
    population = parts["population"]
    target_pool = true_label_probs(model, pool.X, pool.y)
    target_population = true_label_probs(model, population.X, population.y)
    with torch.no_grad():
        predicted = model(torch.from_numpy(pool.X[~membership])).argmax(dim=1).numpy()
    accuracy = float(np.mean(predicted == pool.y[~membership]))

    a = rmia.tune_offline_a(ref_pool, ref_population, trained_on, PROXY, HELPERS)
    scores = rmia.scores(target_pool, target_population, rmia.mean_out(ref_pool, trained_on),
                         ref_population.mean(axis=1), a)
    attack = rmia.attack_results(scores, membership)

    floor = BASELINE_VAL_ACCURACY - (TEST_TOLERANCE if args.split == "test" else 0.0)
    utility = ConstraintOutcome(
        name="utility_floor", ok=accuracy >= floor - 1e-12, value=accuracy, limit=floor,
        detail=f"test_acc {accuracy:.4f} must be >= {floor:.4f} (the baseline's val accuracy"
               + (f" minus {TEST_TOLERANCE})" if args.split == "test" else ")"),
    )
    n_non = int((~membership).sum())
    write_result(
        args.result,
        {DATASET: {"AUC_gap": abs(attack["AUC"] - 0.5), **attack, "test_acc": accuracy, "offline_a": a}},
        stderrs={DATASET: {"test_acc": math.sqrt(accuracy * (1 - accuracy) / n_non)}},
        constraints=[utility],
        info={"split": args.split, "members": int(membership.sum()), "non_members": n_non,
              "population": len(population.y), "architecture": spec.model_dump()},
    )


if __name__ == "__main__":
    main()
