"""Score one DP-SGD experiment: accuracy of its predictions, and whether it kept the privacy budget.

Labels come from PRIVATE only. The privacy budget is never taken from what the experiment says about
itself: epsilon is recomputed with Opacus's RDP accountant from the DP-SGD parameters it recorded in
OUT/dp_config.json, after checking those parameters against the split sizes recomputed here.
Malformed predictions -> exit 1 with a one-line message; a missing or inconsistent dp_config.json ->
the privacy_budget constraint is reported as violated, with the reason.
"""

from __future__ import annotations

import json
import math
import sys
import warnings
from pathlib import Path

import numpy as np
from opacus.accountants import RDPAccountant
from sklearn.metrics import accuracy_score

sys.path.insert(0, str(Path(__file__).resolve().parent))
from digits_data import NUM_CLASSES  # noqa: E402

from pytest_fmlbench.evalkit import (  # noqa: E402
    ConstraintOutcome,
    fail,
    harness_args,
    load_labels,
    load_split_config,
    read_json,
    split_indices,
    write_result,
)

TARGET_EPSILON = 8.0
TARGET_DELTA = 1e-5
EPSILON_RTOL = 1e-3  # Opacus's noise calibration is a binary search that stops within 0.01 below target
CONSTRAINT = "privacy_budget"
DATASET = "digits"


def _number(dp: dict, key: str, kind: type) -> float | int:
    value = dp.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{key}={value!r} is not a finite number")
    if kind is int and value != int(value):
        raise ValueError(f"{key}={value!r} is not an integer")
    return kind(value)


def check_privacy(path: Path, n_train: int) -> tuple[ConstraintOutcome, dict]:
    """Recompute epsilon from the recorded DP-SGD parameters; any doubt counts as a violation."""

    def violated(detail: str, value: float | None = None) -> tuple[ConstraintOutcome, dict]:
        return ConstraintOutcome(name=CONSTRAINT, ok=False, value=value, limit=TARGET_EPSILON,
                                 detail=detail), {}

    if not path.is_file():
        return violated("dp_config.json is missing: the run recorded no DP configuration")
    try:
        dp = read_json(path)
    except (OSError, json.JSONDecodeError) as exc:
        return violated(f"dp_config.json is not valid JSON: {exc}")
    if not isinstance(dp, dict):
        return violated("dp_config.json is not a JSON object")
    try:
        sigma = _number(dp, "noise_multiplier", float)
        rate = _number(dp, "sample_rate", float)
        steps = _number(dp, "steps", int)
        delta = _number(dp, "delta", float)
        recorded_n = _number(dp, "n_train", int)
        batch_size = _number(dp, "batch_size", int)
        clip = _number(dp, "max_grad_norm", float)
    except ValueError as exc:
        return violated(f"dp_config.json: {exc}")
    if sigma <= 0 or clip <= 0 or steps < 1 or batch_size < 1 or not 0 < rate <= 1:
        return violated(f"dp_config.json has nonsense values: noise_multiplier={sigma}, max_grad_norm={clip}, "
                        f"steps={steps}, batch_size={batch_size}, sample_rate={rate}")
    if dp.get("poisson_sampling") is not True:
        return violated("dp_config.json does not record Poisson sampling, which the RDP analysis assumes")
    if not 0 < delta <= TARGET_DELTA:
        return violated(f"delta={delta} is not in (0, {TARGET_DELTA}]")
    if recorded_n != n_train:
        return violated(f"n_train={recorded_n} recorded, but the split has {n_train} training examples")
    # Opacus's Poisson rate for a batch size: 1 / (number of batches per epoch) ~ batch_size / n_train
    expected_rate = 1 / math.ceil(n_train / batch_size)
    if not math.isclose(rate, expected_rate, rel_tol=1e-9):
        return violated(f"sample_rate={rate} does not match batch_size={batch_size} over n_train={n_train} "
                        f"(expected {expected_rate})")
    accountant = RDPAccountant()
    # equivalent to accountant.step(noise_multiplier=sigma, sample_rate=rate) called `steps` times,
    # which the accountant merges into this single history entry
    accountant.history = [(sigma, rate, steps)]
    try:
        with warnings.catch_warnings():  # "optimal order is the largest alpha" is informational here
            warnings.simplefilter("ignore")
            epsilon = float(accountant.get_epsilon(delta=delta))
    except (ValueError, OverflowError, ZeroDivisionError) as exc:
        return violated(f"the RDP accountant failed on the recorded parameters: {exc}")
    ok = math.isfinite(epsilon) and epsilon <= TARGET_EPSILON * (1 + EPSILON_RTOL)
    detail = (f"recomputed epsilon {epsilon:.4f} at delta {delta:g} (noise_multiplier {sigma:.4f}, "
              f"sample_rate {rate:.5f}, {steps} steps)")
    if not ok:
        detail += f" exceeds the budget {TARGET_EPSILON}"
    summary = {"epsilon_recomputed": epsilon, "noise_multiplier": sigma, "sample_rate": rate, "steps": steps,
               "delta": delta, "n_train": n_train, "batch_size": batch_size, "max_grad_norm": clip}
    return ConstraintOutcome(name=CONSTRAINT, ok=ok, value=epsilon, limit=TARGET_EPSILON, detail=detail), summary


def main() -> None:
    args = harness_args()
    for name in ("workspace", "out", "private", "result"):
        if getattr(args, name) is None:
            fail(f"--{name} is required")
    visible_labels = args.private / "visible_y.npy"
    if not visible_labels.is_file():
        fail(f"{visible_labels} is missing: run prepare.py --split val first")
    visible_y = np.load(visible_labels, allow_pickle=False)
    try:
        split_config = load_split_config(args.workspace)
    except Exception as exc:  # a broken editable split_config.json is the experiment's failure
        fail(f"split_config.json is invalid: {str(exc).splitlines()[0]}")
    train_idx, val_idx = split_indices(len(visible_y), split_config)

    if args.split == "val":
        labels = visible_y[val_idx]
    else:
        test_labels = args.private / "test_y.npy"
        if not test_labels.is_file():
            fail(f"{test_labels} is missing: run prepare.py --split test first")
        labels = np.load(test_labels, allow_pickle=False)

    pred = load_labels(args.out / "predictions.npy", len(labels), NUM_CLASSES)
    accuracy = float(accuracy_score(labels, pred))
    stderr = math.sqrt(accuracy * (1 - accuracy) / len(labels))
    privacy, dp_summary = check_privacy(args.out / "dp_config.json", len(train_idx))
    write_result(
        args.result,
        {DATASET: {"test_acc": accuracy}},
        stderrs={DATASET: {"test_acc": stderr}},
        constraints=[privacy],
        info={"split": args.split, "n_eval": len(labels), "n_train": len(train_idx), **dp_summary},
    )


if __name__ == "__main__":
    main()
