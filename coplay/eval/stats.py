"""Summary statistics for scores: mean with 95% confidence intervals (Student t and bootstrap), Wilson
intervals for win rates, and the paired difference of two evaluations on the same start seeds. Used by
`coplay play`, evaluation, `coplay eval --compare`, the ruler and benchmarks. numpy + scipy only; never
imports coplay, ray or torch.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np


@dataclass(frozen=True)
class Summary:
    """Mean, 95% intervals (t and percentile bootstrap), median, min, max of n values."""

    n: int
    mean: float
    ci_low: float
    ci_high: float
    boot_low: float
    boot_high: float
    median: float
    min: float
    max: float

    @property
    def half_width(self) -> float:
        return (self.ci_high - self.ci_low) / 2

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


def t_interval(values: list[float], confidence: float = 0.95) -> tuple[float, float]:
    """Student-t interval for the mean; a single value (or zero spread) gives a zero-width interval."""
    from scipy import stats

    x = np.asarray(values, dtype=float)
    mean = float(x.mean())
    if len(x) < 2 or float(x.std(ddof=1)) == 0.0:
        return mean, mean
    half = float(stats.t.ppf(0.5 + confidence / 2, len(x) - 1)) * float(x.std(ddof=1)) / math.sqrt(len(x))
    return mean - half, mean + half


def bootstrap_interval(values: list[float], confidence: float = 0.95, resamples: int = 2000,
                       seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval for the mean, seeded (the same values give the same interval)."""
    x = np.asarray(values, dtype=float)
    if len(x) < 2:
        return float(x.mean()), float(x.mean())
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, len(x), size=(resamples, len(x)))].mean(axis=1)
    alpha = (1 - confidence) / 2
    return float(np.quantile(means, alpha)), float(np.quantile(means, 1 - alpha))


def summarize(values: list[float], confidence: float = 0.95) -> Summary:
    """Everything the evaluation tables show for one list of scores."""
    if not values:
        raise ValueError("summarize: no values")
    x = np.asarray(values, dtype=float)
    low, high = t_interval(values, confidence)
    blow, bhigh = bootstrap_interval(values, confidence)
    return Summary(len(x), float(x.mean()), low, high, blow, bhigh, float(np.median(x)), float(x.min()),
                   float(x.max()))


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a win rate (well-behaved at 0 and n)."""
    from scipy import stats

    if n == 0:
        raise ValueError("wilson_interval: n = 0")
    z = float(stats.norm.ppf(0.5 + confidence / 2))
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True)
class PairedDifference:
    """B − A over the episodes both evaluations played from the same start seed (and seat): the mean of the
    per-seed differences with its 95% t and bootstrap intervals. Pairing removes the seed-to-seed spread
    that both players share (a hard deal is hard for both), so it resolves smaller differences than the
    unpaired Welch interval on the same episodes."""

    n: int
    mean_a: float
    mean_b: float
    difference: float
    ci_low: float
    ci_high: float
    boot_low: float
    boot_high: float

    @property
    def excludes_zero(self) -> bool:
        return self.ci_low > 0 or self.ci_high < 0

    def as_dict(self) -> dict[str, float]:
        return {**asdict(self), "excludes_zero": self.excludes_zero}


def paired_difference(a: dict[str, float], b: dict[str, float],
                      confidence: float = 0.95) -> PairedDifference | None:
    """Paired B − A over the keys (start seeds, `"<seed>:<seat>"` in multi-seat games) both hold; None when
    they share fewer than 2 (no interval can be formed)."""
    shared = sorted(set(a) & set(b), key=str)
    if len(shared) < 2:
        return None
    xa = [float(a[k]) for k in shared]
    xb = [float(b[k]) for k in shared]
    diffs = [vb - va for va, vb in zip(xa, xb, strict=True)]
    low, high = t_interval(diffs, confidence)
    blow, bhigh = bootstrap_interval(diffs, confidence)
    return PairedDifference(len(shared), float(np.mean(xa)), float(np.mean(xb)), float(np.mean(diffs)),
                            low, high, blow, bhigh)


def gain_verdict(d: PairedDifference, higher_is_better: bool = True, what: str = "the score") -> str:
    """In plain words whether a paired change is a measured gain: the whole 95% t-interval on the better
    side of 0 (a gain), on the worse side (a loss), or straddling it (no change measured at this n). The
    t and bootstrap intervals must agree, so a skewed sample does not read as a gain on one of them only."""
    gained = (d.ci_low > 0 and d.boot_low > 0) if higher_is_better else (d.ci_high < 0 and d.boot_high < 0)
    lost = (d.ci_high < 0 and d.boot_high < 0) if higher_is_better else (d.ci_low > 0 and d.boot_low > 0)
    interval = f"{d.difference:+.2f} [{d.ci_low:.2f}, {d.ci_high:.2f}] over {d.n} pairs"
    if gained:
        return f"a gain was measured: {what} {interval}, the 95% interval excludes 0"
    if lost:
        return f"a loss was measured: {what} {interval}, the 95% interval excludes 0 on the worse side"
    return f"no gain was measured: {what} {interval}, the 95% interval includes 0"
