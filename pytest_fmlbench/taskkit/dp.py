"""A DP-SGD run's privacy budget, recomputed from the configuration it recorded (never its own epsilon).

The experiment writes ``dp_config.json`` (noise multiplier, Poisson sample rate, steps, delta, the
training-set size and batch size it used); :func:`check_budget` checks those against the split sizes
the evaluator recomputed, re-runs Opacus's accountant on them and reports a constraint outcome. Any
doubt (a missing field, a rate that does not follow from the batch size) counts as a violation.
"""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

from ..evalkit import ConstraintOutcome, read_json

CONSTRAINT = "privacy_budget"
EPSILON_RTOL = 1e-3  # Opacus's noise calibration stops just under the target


def _number(record: dict, key: str, kind: type) -> float | int:
    value = record.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{key}={value!r} is not a finite number")
    if kind is int and value != int(value):
        raise ValueError(f"{key}={value!r} is not an integer")
    return kind(value)


def _accountant(name: str):
    from opacus.accountants import PRVAccountant, RDPAccountant

    return {"prv": PRVAccountant, "rdp": RDPAccountant}[name]()


def check_budget(path: Path, n_train: int, target_epsilon: float, target_delta: float, accountant: str,
                 drop_last: bool) -> tuple[ConstraintOutcome, dict]:
    """(the outcome, a summary for the verdict's info).

    The Poisson rate Opacus uses is one over the batches per epoch of the loader it replaced: the recorded
    batch size over ``n_train``, rounded down when that loader dropped its last partial batch.
    """

    def violated(detail: str) -> tuple[ConstraintOutcome, dict]:
        return ConstraintOutcome(name=CONSTRAINT, ok=False, limit=target_epsilon, detail=detail), {}

    if not path.is_file():
        return violated("dp_config.json is missing: the run recorded no DP configuration")
    try:
        record = read_json(path)
    except (OSError, json.JSONDecodeError) as exc:
        return violated(f"dp_config.json is not valid JSON: {exc}")
    if not isinstance(record, dict):
        return violated("dp_config.json is not a JSON object")
    try:
        sigma = _number(record, "noise_multiplier", float)
        rate = _number(record, "sample_rate", float)
        steps = _number(record, "steps", int)
        delta = _number(record, "delta", float)
        recorded_n = _number(record, "n_train", int)
        batch_size = _number(record, "batch_size", int)
    except ValueError as exc:
        return violated(f"dp_config.json: {exc}")
    if record.get("accountant") != accountant:
        return violated(f"dp_config.json records accountant {record.get('accountant')!r}, the task uses {accountant!r}")
    if sigma <= 0 or steps < 1 or not 0 < rate <= 1:
        return violated(f"dp_config.json has nonsense values: noise_multiplier={sigma}, steps={steps}, sample_rate={rate}")
    if record.get("poisson_sampling") is not True:
        return violated("dp_config.json does not record Poisson sampling, which the analysis assumes")
    if not 0 < delta <= target_delta:
        return violated(f"delta={delta} is not in (0, {target_delta}]")
    if recorded_n != n_train:
        return violated(f"n_train={recorded_n} recorded, but the split has {n_train} training examples")
    batches_per_epoch = n_train // batch_size if drop_last else math.ceil(n_train / batch_size)
    if batch_size < 1 or batches_per_epoch < 1:
        return violated(f"batch_size={batch_size} leaves no batch of {n_train} training examples")
    expected_rate = 1 / batches_per_epoch
    if not math.isclose(rate, expected_rate, rel_tol=1e-9):
        return violated(f"sample_rate={rate} does not follow from the batch size ({batches_per_epoch} batches per "
                        f"epoch over {n_train} examples: {expected_rate})")
    ledger = _accountant(accountant)
    # the same as `steps` calls of accountant.step(noise_multiplier=sigma, sample_rate=rate), merged
    ledger.history = [(sigma, rate, steps)]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            epsilon = float(ledger.get_epsilon(delta=delta))
    except (ValueError, OverflowError, ZeroDivisionError, RuntimeError) as exc:
        return violated(f"the {accountant.upper()} accountant failed on the recorded parameters: {exc}")
    ok = math.isfinite(epsilon) and epsilon <= target_epsilon * (1 + EPSILON_RTOL)
    detail = (f"recomputed epsilon {epsilon:.4f} at delta {delta:g} ({accountant.upper()}; noise_multiplier "
              f"{sigma:.4f}, sample_rate {rate:.6f}, {steps} steps)") + ("" if ok else f" exceeds {target_epsilon}")
    summary = {"epsilon_recomputed": epsilon, "noise_multiplier": sigma, "sample_rate": rate, "steps": steps,
               "delta": delta, "n_train": n_train, "batch_size": batch_size}
    return ConstraintOutcome(name=CONSTRAINT, ok=ok, value=epsilon, limit=target_epsilon, detail=detail), summary
