"""What a comparison could have seen: the power of its t-test, the smallest drop it would detect, the seeds a
drop needs, and a task's declared noise (task.yaml's ``noise``) on NI's scale.

The test is the one :mod:`.diff` runs: two-sided at ``ALPHA``, paired by seed (or Welch's), with the spread
the seeds show; with one seed a side, a z-test against the task's declared seed noise (the difference of two
independent runs has a standard deviation of sqrt(2) x seed_sd). When the two sessions ran on different
hardware, a shift up to the task's kernel spread is noise too: the test asks whether the drop exceeds the
spread (a one-sided margin), so the smallest detectable drop grows by the spread.

Power of a t-test at a true change delta: P(|T| > t_crit) with T noncentral t, df degrees of freedom and
noncentrality delta / SEM (scipy.stats.nct); with a known standard deviation, the normal instead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

ALPHA = 0.05
POWER = 0.8
NAN = float("nan")
# the most seeds a side `seeds_needed` looks at; beyond it, a task is better redesigned than run more
MAX_SEEDS = 100


@dataclass(frozen=True)
class Noise:
    """A task's declared noise: on NI's scale (over NI's D, for NI and the signed improvement) and as declared,
    in the metric's raw units (for the test value)."""

    seed_sd: float
    kernel_spread: float
    raw_seed_sd: float
    raw_kernel_spread: float
    measured_on: str = ""

    def on(self, measure: str) -> tuple[float, float]:
        """(seed sd, kernel spread) on the scale of a measure: ``ni``, ``signed`` or ``test``."""
        if measure == "test":
            return self.raw_seed_sd, self.raw_kernel_spread
        return self.seed_sd, self.kernel_spread


def declared_noise(spec) -> Noise | None:
    """task.yaml's ``noise`` in NI units, with the scorer's normalisation (transform, then over D); None when
    the task declares none, or its NI has no scale (an unmeasured baseline)."""
    from ..scoring.metrics import raw_value, scale, transform_value

    noise, baseline = spec.noise, spec.baseline.test
    if noise is None or baseline is None:
        return None
    transform = spec.metric.transform
    scored = transform_value(baseline, transform)
    if scored is None:
        return None
    d = scale(spec.normalization.best, spec.normalization.worst, scored)
    if not d:
        return None

    if noise.scale == "scored":
        # declared after the transform: NI's scale directly. The raw test value's seed spread is not known (a
        # comparison of raw values at one seed cannot tell); the kernel spread, a margin, is carried back to the
        # raw scale at the baseline, on the side where it is wider
        low, high = (raw_value(scored + side * noise.kernel_spread, transform) for side in (-1, 1))
        raw_spread = max(abs(low - baseline), abs(high - baseline)) if noise.kernel_spread else 0.0
        return Noise(seed_sd=noise.seed_sd / d, kernel_spread=noise.kernel_spread / d, raw_seed_sd=NAN,
                     raw_kernel_spread=raw_spread, measured_on=noise.measured_on)

    def in_ni(raw: float) -> float:
        if transform == "none" or raw == 0:
            return raw / d
        # a transformed metric: the raw spread around the baseline, carried to the scored scale (its slope there)
        up, down = transform_value(baseline + raw, transform), transform_value(baseline - raw, transform)
        if up is None or down is None:
            return NAN
        return abs(up - down) / 2 / d

    return Noise(seed_sd=in_ni(noise.seed_sd), kernel_spread=in_ni(noise.kernel_spread), raw_seed_sd=noise.seed_sd,
                 raw_kernel_spread=noise.kernel_spread, measured_on=noise.measured_on)


def power(delta: float, sem: float, df: float, margin: float = 0.0, alpha: float = ALPHA) -> float:
    """The chance that the test finds a true drop of ``delta`` beyond ``margin``: its statistic (drop -
    margin) / SEM over the two-sided critical value, with standard error ``sem`` on ``df`` degrees of freedom
    (inf: a known standard deviation). A change the other way is no regression: only that tail counts."""
    from scipy import stats  # off the plugin's import path: only a comparison needs it

    if math.isnan(sem) or math.isnan(df) or math.isnan(delta):
        return NAN
    effect = delta - margin
    if sem == 0:
        return 1.0 if effect > 0 else 0.0
    if math.isinf(df):
        return float(stats.norm.sf(stats.norm.ppf(1 - alpha / 2) - effect / sem))
    return float(stats.nct.sf(stats.t.ppf(1 - alpha / 2, df), df, effect / sem))


def detectable(sem: float, df: float, margin: float = 0.0, target: float = POWER, alpha: float = ALPHA) -> float:
    """The smallest true change the test finds with ``target`` power: 0 when there is no spread and no
    margin (any change is real), NaN when the spread is unknown."""
    from scipy import optimize

    if math.isnan(sem) or math.isnan(df) or df <= 0:
        return NAN
    if sem == 0:
        return margin
    # power at the margin is alpha / 2, and it grows to 1: a root lies between
    high = margin + sem
    while power(high, sem, df, margin, alpha) < target:
        high = margin + 2 * (high - margin)
    return float(optimize.brentq(lambda delta: power(delta, sem, df, margin, alpha) - target, margin, high,
                                 xtol=1e-12 * max(1.0, high)))


def seeds_needed(drop: float, sd: float, margin: float = 0.0, declared: bool = False, target: float = POWER,
                 alpha: float = ALPHA) -> int | None:
    """Paired seeds at which a drop of ``drop`` is found with ``target`` power, ``sd`` being the standard
    deviation of the per-seed differences. Two seeds or more are tested against their own spread (a t-test);
    one seed a side only where ``sd`` is ``declared`` (a z-test). None when no number of seeds up to MAX_SEEDS
    does (the drop is within ``margin``, or too small for the spread); 0 when ``sd`` is unknown."""
    if math.isnan(sd) or math.isnan(drop):
        return 0
    if drop <= margin:
        return None
    if sd == 0:
        return 1
    for n in range(1 if declared else 2, MAX_SEEDS + 1):
        df = math.inf if n == 1 else n - 1
        if power(drop, sd / math.sqrt(n), df, margin, alpha) >= target:
            return n
    return None
