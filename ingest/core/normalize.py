"""Range normalization (docs/statistics.md "Normalization"): per sample, by the range of
the sample's own environment.

Pure: numpy only. v′ = (v − min)/(max − min), reversed (1 − v′) when the metric is declared
`invert`; min and max are the environment's declared bounds, and where a bound is not
declared, the environment's observed bound over the whole run (`Observed`). A degenerate range
(max = min) maps every value to 0.5. The normalized family is then aggregated from v′ like the
raw one (ingest.pipeline.aggregate), so the overall normalized mean is the pooled mean of every
sample's v′ — never a raw mean stretched by the widest range.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ingest.core.ranges import EnvRanges, MetricRange
from ingest.core.samples import StepSamples

# (env name, '' = no environment; kind 'reward' | 'sample'; key) -> (lowest, highest) observed
Observed = dict[tuple[str, str, str], tuple[float, float]]
NORMALIZED_STATS = ("mean", "std", "min", "max", "gini_mean")
PREFIX = "norm:"  # a normalized series is stored with stat "norm:<stat>"


@dataclass(frozen=True)
class Bound:
    """The range one environment's values of one metric are normalized by."""

    min: float | None
    max: float | None
    invert: bool
    source: str  # "declared" (both bounds declared), "observed" (some observed), "degenerate"


def declared(ranges: EnvRanges, kind: str, key: str) -> MetricRange:
    if kind == "reward":
        return MetricRange(ranges.reward_min, ranges.reward_max, False)
    return ranges.metrics.get(key, MetricRange())


def bound(ranges: EnvRanges, observed: tuple[float, float] | None, kind: str,
          key: str) -> Bound:
    """Declared bounds first, observed ones where undeclared."""
    d = declared(ranges, kind, key)
    lo = d.min if d.min is not None else (observed[0] if observed else None)
    hi = d.max if d.max is not None else (observed[1] if observed else None)
    if lo is not None and hi is not None and hi == lo:
        source = "degenerate"
    elif d.min is not None and d.max is not None:
        source = "declared"
    else:
        source = "observed"
    return Bound(lo, hi, d.invert, source)


def normalized_column(s: StepSamples, v: np.ndarray, kind: str, key: str,
                      ranges: dict[str, EnvRanges], observed: Observed) -> np.ndarray:
    """v′ for every sample of the step (NaN where v is NaN or no range is known).

    The bounds are worked out per environment; a per-sample array is made only of what some
    environment needs (a zero width's 0.5, an inversion, an overflow's halving): elementwise
    the same operations on the same values as with every bound per sample."""
    names = [*s.env_names, ""]  # code -1 (no environment) indexes the last entry
    bounds = [bound(ranges.get(n, EnvRanges()) if n else EnvRanges(),
                    observed.get((n, kind, key)), kind, key) for n in names]
    lo_env = np.array([np.nan if b.min is None else b.min for b in bounds])
    hi_env = np.array([np.nan if b.max is None else b.max for b in bounds])
    invert = np.array([b.invert for b in bounds])
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        width_env = hi_env - lo_env
        lo = s.by_env(lo_env)
        above = v - lo
        # Huge finite values (a range of ±1e308) overflow the differences: halve both terms
        # there (exactly), so v′ is lost only where it is itself beyond the float range.
        over = np.isinf(above)
        if np.isinf(width_env).any():
            over |= s.by_env(np.isinf(width_env))
        if over.any():
            hi = s.by_env(hi_env)
            width = np.where(over, hi / 2 - lo / 2, s.by_env(width_env))
            above = np.where(over, v / 2 - lo / 2, above)
            out = np.where(width == 0, 0.5, above / np.where(width == 0, 1.0, width))
        elif (width_env == 0).any():
            zero = width_env == 0
            out = np.where(s.by_env(zero), 0.5,
                           above / s.by_env(np.where(zero, 1.0, width_env)))
        else:
            out = np.divide(above, s.by_env(width_env), out=above)
    missing = np.isnan(v)
    if missing.any():
        out = np.where(missing, np.nan, out)
    if invert.all():
        return 1.0 - out
    return np.where(s.by_env(invert), 1.0 - out, out) if invert.any() else out


def observed_in(names: Sequence[str], codes: np.ndarray, kept: np.ndarray,
                columns: list[tuple[str, str, np.ndarray]]) -> Observed:
    """Lowest and highest finite value of the kept samples, per environment (sample i's is
    `names[codes[i]]`, '' for none), of each (kind, key, values) column of one message (merged
    into the run's observed ranges at ingest) or pass: the kept samples sorted by environment
    once, then two segment reductions per column."""
    chosen = np.flatnonzero(kept)
    if not chosen.size:
        return {}
    order = chosen[np.argsort(codes[chosen], kind="stable")]
    sorted_codes = codes[order]
    starts = np.concatenate(([0], np.flatnonzero(sorted_codes[1:] != sorted_codes[:-1]) + 1))
    envs = [str(names[k]) for k in sorted_codes[starts].tolist()]
    out: Observed = {}
    for kind, key, v in columns:
        x = v[order]
        x[~np.isfinite(x)] = np.nan  # (a copy) fmin / fmax skip NaN: all-NaN gives NaN
        lows, highs = np.fmin.reduceat(x, starts), np.fmax.reduceat(x, starts)
        for env, lo, hi in zip(envs, lows.tolist(), highs.tolist(), strict=True):
            if lo == lo:  # some finite value
                out[(env, kind, key)] = (lo, hi)
    return out
