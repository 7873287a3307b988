"""Per-step aggregation: the metric families of DESIGN.md, computed from one step's samples.

Pure: numpy only. `aggregate_step` turns a `StepSamples` (canonical order) and the declared
ranges into `{(kind, key, stat, env): float}`. A statistic with no value at the step is absent,
never NaN. A scope (all samples, then each environment present) is a boolean mask over the
samples; Python loops run over scopes, families and metric names, never over samples or groups.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ingest import columns
from ingest.gini import (
    GroupStat,
    gini_per_group,
    group_gini,
    max_median_ratio_per_group,
    mean_over_groups,
    per_group,
    runs,
)
from ingest.normalize import PREFIX, Observed, normalized_column, observed_in
from ingest.samples import (
    CANCELED,
    KEPT,
    MAX_ASYNC,
    ZERO_ADVANTAGE,
    EnvRanges,
    MetricRange,
    SeriesKey,
    StepSamples,
)

__all__ = ["aggregate_blobs", "aggregate_step", "group_gini"]

Series = dict[SeriesKey, float]
Bound = Callable[[EnvRanges], float | None]

# Undeclared bounds: Gini and "all at min" use 0, "all at max" uses 1 (DESIGN.md).
DEFAULT_LO, DEFAULT_HI = 0.0, 1.0
RATIO = "group_length_max_median_ratio_mean"


@dataclass(frozen=True)
class _Scope:
    env: str | None  # None = all environments
    code: int | None
    mask: np.ndarray  # samples of the scope
    kept: np.ndarray  # kept samples of the scope


def _scopes(s: StepSamples) -> list[_Scope]:
    kept = s.discard == KEPT
    scopes = [_Scope(None, None, np.ones(s.n, dtype=bool), kept)]
    for code in np.unique(s.env[s.env >= 0]):
        mask = s.env == code
        scopes.append(_Scope(s.env_names[int(code)], int(code), mask, mask & kept))
    return scopes


def _per_code(s: StepSamples, ranges: dict[str, EnvRanges], pick: Bound, default: float):
    """One declared bound per env code, `default` where undeclared; index -1 = no environment."""
    found = [pick(ranges.get(name, EnvRanges())) for name in s.env_names]
    return np.array([default if b is None else b for b in found] + [default], dtype=np.float64)


def _metric_bound(m: str, attr: str) -> Bound:
    return lambda r: getattr(r.metrics.get(m, MetricRange()), attr)


def _pct(part: int | np.integer, whole: int | np.integer) -> float:
    return 100.0 * float(part) / float(whole)


def _finite(v: np.ndarray) -> np.ndarray:
    return v[np.isfinite(v)]


def _moments(out: Series, kind: str, key: str, env: str | None, v: np.ndarray) -> None:
    """mean, std (ddof=1, from two values), min, max of finite values `v`."""
    if v.size == 0:
        return
    out[(kind, key, "mean", env)] = float(np.mean(v))
    if v.size > 1:
        out[(kind, key, "std", env)] = float(np.std(v, ddof=1))
    out[(kind, key, "min", env)] = float(np.min(v))
    out[(kind, key, "max", env)] = float(np.max(v))


def _group_means(
    x: np.ndarray, idx: np.ndarray, s: StepSamples, scopes: list[_Scope], stat: GroupStat
) -> list[tuple[float | None, int, int]]:
    """Per scope, the mean over groups of `stat` on values x of samples idx.

    In an environment's scope a group is its samples of that environment, so the statistic is
    computed once per (group, env) unit; the overall scope reuses the units unless some group
    mixes environments, and then regroups by group alone.
    """
    width = len(s.env_names) + 1
    g = s.group[idx]
    value, included, unit = per_group(x, g * width + s.env[idx] + 1, stat)
    unit_env, unit_group = unit % width - 1, unit // width
    results = []
    for sc in scopes:
        if sc.code is not None:
            mine = unit_env == sc.code
            results.append(mean_over_groups(value[mine], included[mine]))
        elif np.any(unit_group[1:] == unit_group[:-1]):
            whole_value, whole_included, _ = per_group(x, g, stat)
            results.append(mean_over_groups(whole_value, whole_included))
        else:
            results.append(mean_over_groups(value, included))
    return results


def _value_family(
    out: Series, kind: str, key: str, v: np.ndarray, s: StepSamples, scopes, lo_by_code
) -> None:
    """Reward / sample-metric stats: moments, count, Gini mean and exclusions, null count."""
    idx = np.flatnonzero(scopes[0].kept & np.isfinite(v))
    x = v[idx] - lo_by_code[s.env[idx]]
    ginis = _group_means(x, idx, s, scopes, gini_per_group)
    for sc, (gini, n_inc, n_exc) in zip(scopes, ginis, strict=True):
        if not sc.kept.any():
            continue
        vals = v[sc.kept]
        finite = _finite(vals)
        out[(kind, key, "count", sc.env)] = float(finite.size)
        _moments(out, kind, key, sc.env, finite)
        if gini is not None:
            out[(kind, key, "gini_mean", sc.env)] = gini
        if n_inc + n_exc > 0:
            out[(kind, key, "gini_excluded", sc.env)] = float(n_exc)
        if sc.env is None:
            out[(kind, key, "null_count", None)] = float(vals.size - finite.size)


def _normalized_family(out: Series, kind: str, key: str, v: np.ndarray, s: StepSamples,
                       scopes: list[_Scope]) -> None:
    """The normalized family from v′ (see ingest.normalize): mean, std, min, max and Gini mean
    (on v′, floor 0), overall and per environment, stored with stats `norm:<stat>`."""
    idx = np.flatnonzero(scopes[0].kept & np.isfinite(v))
    ginis = _group_means(v[idx], idx, s, scopes, gini_per_group)
    for sc, (gini, _, _) in zip(scopes, ginis, strict=True):
        finite = _finite(v[sc.kept])
        if finite.size:
            moments: Series = {}
            _moments(moments, kind, key, sc.env, finite)
            for (_, _, stat, _), value in moments.items():
                out[(kind, key, PREFIX + str(stat), sc.env)] = value
        if gini is not None:
            out[(kind, key, PREFIX + "gini_mean", sc.env)] = gini


def _ranges_family(
    out: Series, key: str, v: np.ndarray, s: StepSamples, scopes, lo_by_code, hi_by_code
) -> None:
    """Share at the declared min / max and count outside, over samples whose env declares."""
    if np.isnan(lo_by_code).all() and np.isnan(hi_by_code).all():
        return
    lo, hi = lo_by_code[s.env], hi_by_code[s.env]
    finite = np.isfinite(v)
    for sc in scopes:
        use = sc.kept & finite
        has_lo, has_hi = use & ~np.isnan(lo), use & ~np.isnan(hi)
        n_lo, n_hi = np.count_nonzero(has_lo), np.count_nonzero(has_hi)
        if n_lo:
            at_min = np.count_nonzero(v[has_lo] == lo[has_lo])
            out[("ranges", key, "at_min_pct", sc.env)] = _pct(at_min, n_lo)
        if n_hi:
            at_max = np.count_nonzero(v[has_hi] == hi[has_hi])
            out[("ranges", key, "at_max_pct", sc.env)] = _pct(at_max, n_hi)
        if n_lo or n_hi:
            below = np.count_nonzero(v[has_lo] < lo[has_lo])
            above = np.count_nonzero(v[has_hi] > hi[has_hi])
            out[("ranges", key, "outside_count", sc.env)] = float(below + above)


def _groups_family(out: Series, s: StepSamples, scopes, lo_by_code, hi_by_code) -> None:
    """Groups of kept samples with finite reward: count, informative, tied, all at min / max.

    A group belongs to the environment of its first sample.
    """
    idx = np.flatnonzero(scopes[0].kept & np.isfinite(s.reward))
    idx = idx[np.argsort(s.group[idx], kind="stable")]  # stable: a group's first sample leads
    starts, _ = runs(s.group[idx])
    r = s.reward[idx]
    if starts.size:
        gmin, gmax = np.minimum.reduceat(r, starts), np.maximum.reduceat(r, starts)
    else:
        gmin = gmax = np.zeros(0)
    genv = s.env[idx[starts]]
    tied = gmin == gmax
    all_min = tied & (gmin == lo_by_code[genv])
    all_max = tied & (gmax == hi_by_code[genv])
    for sc in scopes:
        if not sc.kept.any():
            continue
        mine = np.ones(genv.size, dtype=bool) if sc.code is None else genv == sc.code
        counts = {
            "count": mine,
            "informative": mine & ~tied,
            "tied": mine & tied,
            "all_min": mine & all_min,
            "all_max": mine & all_max,
        }
        for stat, sel in counts.items():
            out[("groups", "groups", stat, sc.env)] = float(np.count_nonzero(sel))


def _tokens(s: StepSamples) -> dict[str, np.ndarray]:
    cols: dict[str, np.ndarray] = {}
    if s.prompt_tokens is not None:
        cols["prompt_tokens"] = s.prompt_tokens
    if s.completion_tokens is not None:
        cols["completion_tokens"] = s.completion_tokens
    if s.prompt_tokens is not None and s.completion_tokens is not None:
        both = np.isfinite(s.prompt_tokens) & np.isfinite(s.completion_tokens)
        total = np.full(s.n, np.nan)
        np.add(s.prompt_tokens, s.completion_tokens, out=total, where=both)
        cols["total_tokens"] = total
    return cols


def _length_groups(out: Series, s: StepSamples, scopes: list[_Scope]) -> None:
    """Completion-token Gini (lo = 0) and max / median ratio, over kept samples per group."""
    if s.completion_tokens is None:
        return
    idx = np.flatnonzero(scopes[0].kept & np.isfinite(s.completion_tokens))
    x = s.completion_tokens[idx]
    ginis = _group_means(x, idx, s, scopes, gini_per_group)
    ratios = _group_means(x, idx, s, scopes, max_median_ratio_per_group)
    for sc, (gini, _, _), (ratio, _, _) in zip(scopes, ginis, ratios, strict=True):
        if gini is not None:
            out[("rollouts", "group_length_gini_mean", "group_length_gini_mean", sc.env)] = gini
        if ratio is not None:
            out[("rollouts", RATIO, RATIO, sc.env)] = ratio


def _rollouts_family(out: Series, s: StepSamples, scopes, tokens: dict[str, np.ndarray]) -> None:
    """Token moments, stop-by-length share, length groups, off-policy lag; kept samples."""
    for sc in scopes:
        for key, col in tokens.items():
            _moments(out, "rollouts", key, sc.env, _finite(col[sc.kept]))
        if s.stop_length is not None:
            stop = _finite(s.stop_length[sc.kept])
            if stop.size:
                pct = _pct(np.count_nonzero(stop == 1), stop.size)
                out[("rollouts", "stop_reason_length_pct", "stop_reason_length_pct", sc.env)] = pct
        if s.off_policy_steps is not None:
            lag = _finite(s.off_policy_steps[sc.kept])
            if lag.size:
                out[("rollouts", "off_policy_steps", "mean", sc.env)] = float(np.mean(lag))
            if lag.size > 1:
                out[("rollouts", "off_policy_steps", "std", sc.env)] = float(np.std(lag, ddof=1))
    _length_groups(out, s, scopes)


def _discarded_family(out: Series, s: StepSamples, scopes, tokens: dict[str, np.ndarray]) -> None:
    """Count by reason, zero-advantage reward breakdown, canceled, token stats of discards."""
    for sc in scopes:
        d = s.discard[sc.mask]
        discarded = sc.mask & (s.discard != KEPT)
        if sc.env is not None and not discarded.any():
            continue
        n_async = np.count_nonzero(d == MAX_ASYNC)
        n_zero = np.count_nonzero(d == ZERO_ADVANTAGE)
        count = n_async + n_zero
        out[("discarded", "discarded", "count", sc.env)] = float(count)
        out[("discarded", "discarded", "canceled", sc.env)] = float(np.count_nonzero(d == CANCELED))
        if count:
            out[("discarded", "discarded", "max_async_pct", sc.env)] = _pct(n_async, count)
            out[("discarded", "discarded", "zero_advantage_pct", sc.env)] = _pct(n_zero, count)
        r = _finite(s.reward[sc.mask & (s.discard == ZERO_ADVANTAGE)])
        if r.size:
            za = ("discarded", "zero_advantage")
            out[(*za, "reward_zero_pct", sc.env)] = _pct(np.count_nonzero(r == 0), r.size)
            out[(*za, "reward_positive_pct", sc.env)] = _pct(np.count_nonzero(r > 0), r.size)
            out[(*za, "reward_mean", sc.env)] = float(np.mean(r))
        for key, col in tokens.items():
            _moments(out, "discarded", key, sc.env, _finite(col[discarded]))


def aggregate_step(s: StepSamples, ranges: dict[str, EnvRanges],
                   observed: Observed | None = None) -> dict[SeriesKey, float]:
    """Every per-step series of DESIGN.md "Metric families computed per step from samples",
    and the normalized family of the reward and each sample metric.

    `ranges` maps environment name to its declared ranges (a missing name declares nothing);
    `observed` holds the run's observed ranges (used where a bound is not declared; without
    them the step's own values stand in). Keys are (kind, key, stat, env) with env None for
    all samples; values are Python floats.
    """
    out: Series = {}
    scopes = _scopes(s)
    nan = float("nan")
    reward_min = _per_code(s, ranges, lambda r: r.reward_min, nan)
    reward_max = _per_code(s, ranges, lambda r: r.reward_max, nan)
    reward_lo = np.where(np.isnan(reward_min), DEFAULT_LO, reward_min)
    reward_hi = np.where(np.isnan(reward_max), DEFAULT_HI, reward_max)
    _value_family(out, "reward", "reward", s.reward, s, scopes, reward_lo)
    for m, v in s.metrics.items():
        m_min = _per_code(s, ranges, _metric_bound(m, "min"), nan)
        _value_family(out, "sample", m, v, s, scopes, np.where(np.isnan(m_min), 0.0, m_min))
    seen = observed if observed is not None else _observed_here(s)
    for kind, key, v in [("reward", "reward", s.reward),
                         *(("sample", m, v) for m, v in s.metrics.items())]:
        _normalized_family(out, kind, key, normalized_column(s, v, kind, key, ranges, seen),
                           s, scopes)
    if s.advantage is not None:
        for sc in scopes:
            _moments(out, "advantage", "advantage", sc.env, _finite(s.advantage[sc.kept]))
    _groups_family(out, s, scopes, reward_lo, reward_hi)
    tokens = _tokens(s)
    _rollouts_family(out, s, scopes, tokens)
    _discarded_family(out, s, scopes, tokens)
    _ranges_family(out, "reward", s.reward, s, scopes, reward_min, reward_max)
    for m, v in s.metrics.items():
        m_min = _per_code(s, ranges, _metric_bound(m, "min"), nan)
        m_max = _per_code(s, ranges, _metric_bound(m, "max"), nan)
        _ranges_family(out, m, v, s, scopes, m_min, m_max)
    return out


def _observed_here(s: StepSamples) -> Observed:
    kept = s.discard == KEPT
    names = np.array([*s.env_names, ""], dtype=object)[s.env]
    return observed_in(names, kept, [("reward", "reward", s.reward),
                                     *(("sample", m, v) for m, v in s.metrics.items())])


def aggregate_blobs(blobs: list[bytes], ranges: dict[str, EnvRanges],
                    observed: Observed | None = None) -> tuple[int, float | None, Series]:
    """Decode, assemble and aggregate one step's stored batches: (samples, latest sample time,
    series). Pure, so it also runs in a worker process (see ingest.materialize)."""
    samples, latest = columns.assemble_step([columns.decode_batch(b) for b in blobs])
    return samples.n, latest, aggregate_step(samples, ranges, observed)
