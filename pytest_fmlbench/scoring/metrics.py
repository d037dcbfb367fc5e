"""Per-run scores with the original FML-bench scorer's semantics (compute_agent_metrics.py).

Everything here works on a :class:`~pytest_fmlbench.scoring.runs.RunInput`, the scorer's view of one
run, whoever wrote it (our run records or an original results directory).

The rules that decide the numbers, as the original applies them:

* the test value is credited only when the final test produced one; otherwise (crash, missing or
  unreadable result, constraint violated on test, and for us an integrity violation) the raw value IS
  the baseline test value, so NI = 0, and the note says why. The steps' validation values stay as
  recorded: a step is recorded only after the protected files were verified, so they are clean;
* when no validation step succeeded, test and validation are both taken at the baseline (NI 0, gap 0);
* NI = max(0, signed gain / D), D = |p_best - p_worst| with p_worst possibly the baseline value;
* a metric with a transform (e.g. forget quality -> -log10) is scored on the transformed scale, where
  the better direction flips for a decreasing transform;
* a smoke-scale run (ours only) gets no NI: it checks the code path, the declared baselines are not its scale;
* the efficiency curve G_k starts at the run's baseline validation value and moves with every step
  that reported a finite metric; first improvement = first G_k > 1e-15; late-gain fraction =
  (G_K - G_floor(K/2)) / G_K when G_K > 1e-12 (so a one-step run scores 0); best-improvement step =
  the last successful step whose raw metric equals the best validation value.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from .groups import SMOKE

if TYPE_CHECKING:
    from .runs import RunInput

NAN = float("nan")
# reported thresholds of the original: an improvement must clear float noise to count
FIRST_GAIN_EPS = 1e-15
LATE_GAIN_EPS = 1e-12

EXPLORATION = ("spread", "uniqueness", "reach", "effective_dim")
PROCESS_COLUMNS = (
    *EXPLORATION, "val_test_gap", "valid_step_ratio", "llm_failed_calls", "llm_truncated_calls",
    "step_completion_rate", "auc_steps", "first_improvement_step", "late_gain_fraction", "best_improvement_step",
    "tokens_m", "wall_clock_h", "cost_usd",
)


def transform_value(value: float | None, transform: str) -> float | None:
    """The value on the scored scale; None when there is none (missing, NaN, or not in the domain)."""
    if value is None:
        return None
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    if math.isnan(v):
        return None
    if transform == "neg_log10":
        return -math.log10(v) if v > 0 else None
    return v


def raw_value(scored: float, transform: str) -> float:
    """The raw value a scored one comes from: the inverse of ``transform_value``."""
    if transform == "neg_log10":
        return 10.0 ** -scored
    if transform == "none":
        return scored
    raise ValueError(f"unknown transform {transform!r}")


def scored_direction(direction: str, transform: str) -> str:
    """Direction on the scored scale: -log10 is decreasing, so it flips which way is better."""
    if transform == "neg_log10":
        return "lower" if direction == "higher" else "higher"
    return direction


def scale(best: float, worst: float | str, baseline: float) -> float:
    """D = |p_best - p_worst|, p_worst being the baseline value when declared as 'baseline'."""
    return abs(float(best) - (baseline if worst == "baseline" else float(worst)))


def normalized_improvement(agent: float | None, baseline: float | None, direction: str, best: float,
                           worst: float | str) -> float:
    """max(0, signed gain / D); NaN when a value is missing or the range is degenerate."""
    if agent is None or baseline is None or math.isnan(agent) or math.isnan(baseline):
        return NAN
    d = scale(best, worst, baseline)
    if d == 0:
        return NAN
    signed = (agent - baseline) / d if direction == "higher" else (baseline - agent) / d
    return max(signed, 0.0)


def improvement_curve(run: RunInput) -> list[float] | None:
    """G_k for k = 1..K (signed gain of the best value so far over the baseline), or None."""
    t = run.transform
    direction = scored_direction(run.direction, t)
    base = transform_value(run.curve_baseline, t)
    if base is None or not run.steps:
        return None
    d = scale(run.norm_best, run.norm_worst, base)
    if d == 0:
        return None
    best = base
    curve = []
    for step in run.steps:
        value = transform_value(step.metric, t)
        if value is not None and not math.isinf(value):
            if (value > best) if direction == "higher" else (value < best):
                best = value
        curve.append((best - base) / d if direction == "higher" else (base - best) / d)
    return curve


def test_side(run: RunInput) -> tuple[float | None, float | None, bool]:
    """(raw test value credited, raw validation value credited, all validation failed)."""
    all_val_failed = run.best_val is None
    credited = run.test if run.test_reason == "ok" and not all_val_failed else None
    test = run.baseline_test if credited is None else credited
    val = run.baseline_val if all_val_failed else run.best_val
    return test, val, all_val_failed


def note(run: RunInput) -> str:
    """Why the numbers are what they are, as the original's note column (plus our own outcomes)."""
    _, _, all_val_failed = test_side(run)
    if run.test_reason == "integrity violated":
        outcome = "integrity violated -> baseline"
    elif run.test_reason.endswith("before its first step"):
        outcome = f"{run.test_reason} -> baseline"  # no step ran: none failed
    elif all_val_failed:
        outcome = "all val failed -> baseline"
        if run.tested_baseline:
            outcome += " (no valid step: tested the baseline code)"
    elif run.test_reason == "constraint violated":
        outcome = "constraint violated on test (NI = 0) -> baseline"
    elif run.test_reason != "ok":
        outcome = f"{run.test_reason} -> baseline"
    else:
        outcome = "ok"
    return "; ".join([outcome, *run.labels])


def score_run(run: RunInput) -> dict[str, float | str]:
    """Everything but the exploration metrics, for one run."""
    t = run.transform
    direction = scored_direction(run.direction, t)
    test, val, _ = test_side(run)
    raw = transform_value(test, t)
    base_test = transform_value(run.baseline_test, t)
    base_val = transform_value(run.baseline_val, t)
    best_val = transform_value(val, t)
    ni = normalized_improvement(raw, base_test, direction, run.norm_best, run.norm_worst)
    ni_val = normalized_improvement(best_val, base_val, direction, run.norm_best, run.norm_worst)
    if run.scale == SMOKE:
        # fixture data and a few batches: the declared baselines are the original's scale, not this one's
        ni = ni_val = NAN
    gap = abs(ni_val - ni) if not (math.isnan(ni_val) or math.isnan(ni)) else NAN

    successes = sum(1 for s in run.steps if s.success)
    valid_ratio = successes / run.total_steps if run.total_steps > 0 else NAN
    # the share of the step budget the agent used (the paper's 'completed 7% of its budget'); NaN where the
    # budget is unknown (the original's results do not record it)
    completion = run.total_steps / run.steps_budget if run.steps_budget else NAN

    curve = improvement_curve(run)
    if curve is None:
        auc = first = late = NAN
    else:
        k = len(curve)
        auc = sum(curve) / k
        first = next((float(i + 1) for i, g in enumerate(curve) if g > FIRST_GAIN_EPS), NAN)
        final, half = curve[-1], curve[k // 2 - 1]
        late = (final - half) / final if final > LATE_GAIN_EPS else NAN

    best_step = NAN
    if run.best_val is not None:
        matches = [i + 1 for i, s in enumerate(run.steps) if s.success and s.metric == run.best_val]
        if matches:
            best_step = float(matches[-1])

    return {
        "metric": run.metric, "direction": direction, "transform": t,
        "baseline_val": base_val if base_val is not None else NAN,
        "baseline_test": base_test if base_test is not None else NAN,
        "best_val": best_val if best_val is not None else NAN,
        "raw_test": raw if raw is not None else NAN,
        "note": note(run), "ni": ni, "ni_val": ni_val,
        "val_test_gap": gap, "valid_step_ratio": valid_ratio,
        # beyond the original's twelve: LLM calls that failed for good (NaN for the original's results)
        "llm_failed_calls": run.failed_calls if run.failed_calls is not None else NAN,
        # beyond the original's twelve: replies cut off at their length limit (NaN for the original's results)
        "llm_truncated_calls": run.truncated_calls if run.truncated_calls is not None else NAN,
        # beyond the original's twelve: steps used / step budget
        "step_completion_rate": completion, "auc_steps": auc,
        "first_improvement_step": first, "late_gain_fraction": late, "best_improvement_step": best_step,
        "tokens_m": run.tokens / 1e6 if run.tokens is not None else NAN,
        "wall_clock_h": run.wall_s / 3600.0 if run.wall_s is not None else NAN,
        # beyond the original's twelve: dollars, NaN when any call's price is unknown
        "cost_usd": run.cost_usd if run.cost_usd is not None else NAN,
        **audit_columns(run),
    }


def audit_columns(run: RunInput) -> dict[str, float | str]:
    """The run's audit, beside its scores (it never changes them): suspect (1/0, NaN where not audited) with
    its reasons, and each research-review dimension averaged over the judges."""
    reasons = run.suspect_reasons
    return {
        "suspect": NAN if reasons is None else float(bool(reasons)),
        "suspect_reasons": "\n".join(reasons or []),
        "judges": ", ".join(run.judges),
        "judge_cost_usd": run.judge_cost_usd if run.judge_cost_usd is not None else NAN,
        **{f"review_{name}": float(score) for name, score in run.review.items()},
    }
