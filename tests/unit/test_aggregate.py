"""aggregate_step and group_gini against hand-computed cases and a slow, loop-based oracle."""

from __future__ import annotations

import math
import statistics
from collections import defaultdict

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ingest.core.ranges import EnvRanges, MetricRange
from ingest.core.samples import CANCELED, KEPT, MAX_ASYNC, ZERO_ADVANTAGE, StepSamples
from ingest.pipeline.aggregate import aggregate_step, group_gini
from ingest.pipeline.gini import sort_within_groups

NAN = float("nan")


def make_step(
    reward, group=None, env=None, env_names=(), discard=None, metrics=None, **cols
) -> StepSamples:
    """A StepSamples from plain lists; groups default to one per sample, env to none."""
    n = len(reward)
    return StepSamples(
        reward=np.asarray(reward, dtype=np.float64),
        group=np.asarray(range(n) if group is None else group, dtype=np.int64),
        env=np.asarray([-1] * n if env is None else env, dtype=np.int64),
        env_names=list(env_names),
        discard=np.asarray([KEPT] * n if discard is None else discard, dtype=np.int8),
        metrics={k: np.asarray(v, dtype=np.float64) for k, v in (metrics or {}).items()},
        **{k: None if v is None else np.asarray(v, dtype=np.float64) for k, v in cols.items()},
    )


# ---------------------------------------------------------------------------------------------
# The oracle: the docs/statistics.md definitions, one sample at a time, no numpy arithmetic.


def oracle_gini(pairs_by_group: dict[int, list[tuple[float, float]]]):
    """(mean, n_included, n_excluded) by the double-sum formula; pairs are (value, lo)."""
    ginis, excluded = [], 0
    for pairs in pairs_by_group.values():
        pairs = [(v, lo) for v, lo in pairs if math.isfinite(v)]
        if not pairs:
            continue
        if len(pairs) == 1 or any(v < lo for v, lo in pairs):
            excluded += 1
            continue
        xs = [v - lo for v, lo in pairs]
        n = len(xs)
        spread = sum(abs(a - b) for a in xs for b in xs)
        ginis.append(0.0 if spread == 0 else spread / (2 * n * n * (sum(xs) / n)))
    return (statistics.fmean(ginis) if ginis else None), len(ginis), excluded


def oracle_moments(out, kind, key, env, vals):
    if not vals:
        return
    out[(kind, key, "mean", env)] = statistics.fmean(vals)
    if len(vals) > 1:
        out[(kind, key, "std", env)] = statistics.stdev(vals)
    out[(kind, key, "min", env)] = min(vals)
    out[(kind, key, "max", env)] = max(vals)


def declared_bounds(s: StepSamples, ranges, i: int, metric: str | None):
    """(min, max) declared for sample i's environment: reward when metric is None."""
    e = int(s.env[i])
    env_ranges = ranges.get(s.env_names[e], EnvRanges()) if e >= 0 else EnvRanges()
    if metric is None:
        return env_ranges.reward_min, env_ranges.reward_max
    declared = env_ranges.metrics.get(metric, MetricRange())
    return declared.min, declared.max


def or_default(value, default):
    return default if value is None else value


def oracle_values(out, s, ranges, env, kept, kind, key, col, metric):
    if not kept:
        return
    finite = [float(col[i]) for i in kept if math.isfinite(col[i])]
    out[(kind, key, "count", env)] = float(len(finite))
    oracle_moments(out, kind, key, env, finite)
    by_group = defaultdict(list)
    for i in kept:
        lo = or_default(declared_bounds(s, ranges, i, metric)[0], 0.0)
        by_group[int(s.group[i])].append((float(col[i]), lo))
    gini, included, excluded = oracle_gini(by_group)
    if gini is not None:
        out[(kind, key, "gini_mean", env)] = gini
    if included + excluded:
        out[(kind, key, "gini_excluded", env)] = float(excluded)
    if env is None:
        out[(kind, key, "null_count", None)] = float(len(kept) - len(finite))


def oracle_groups(out, s, ranges, env, code, kept):
    if not kept:
        return
    # Groups over the whole step; a group's env is the env of its first member.
    members = defaultdict(list)
    for i in range(s.n):
        if s.discard[i] == KEPT and math.isfinite(s.reward[i]):
            members[int(s.group[i])].append(i)
    counts = dict.fromkeys(("count", "informative", "tied", "all_min", "all_max"), 0.0)
    for idx in members.values():
        if code is not None and s.env[idx[0]] != code:
            continue
        rewards = [s.reward[i] for i in idx]
        counts["count"] += 1
        if len(set(rewards)) > 1:
            counts["informative"] += 1
            continue
        counts["tied"] += 1
        lo, hi = declared_bounds(s, ranges, idx[0], None)
        counts["all_min"] += rewards[0] == or_default(lo, 0.0)
        counts["all_max"] += rewards[0] == or_default(hi, 1.0)
    for stat, c in counts.items():
        out[("groups", "groups", stat, env)] = c


def oracle_tokens(s) -> dict:
    tokens = {}
    if s.prompt_tokens is not None:
        tokens["prompt_tokens"] = list(s.prompt_tokens)
    if s.completion_tokens is not None:
        tokens["completion_tokens"] = list(s.completion_tokens)
    if s.prompt_tokens is not None and s.completion_tokens is not None:
        pairs = zip(s.prompt_tokens, s.completion_tokens, strict=True)
        tokens["total_tokens"] = [p + c for p, c in pairs]
    return tokens


def oracle_lengths(out, s, env, kept):
    lengths = defaultdict(list)
    for i in kept:
        if math.isfinite(s.completion_tokens[i]):
            lengths[int(s.group[i])].append(float(s.completion_tokens[i]))
    gini = oracle_gini({g: [(x, 0.0) for x in xs] for g, xs in lengths.items()})[0]
    if gini is not None:
        out[("rollouts", "group_length_gini_mean", "group_length_gini_mean", env)] = gini
    ratios = []
    for xs in lengths.values():
        top, middle = max(xs), statistics.median(xs)
        if top == 0:
            ratios.append(1.0)
        elif middle != 0:
            ratios.append(top / middle)
    if ratios:
        key = "group_length_max_median_ratio_mean"
        out[("rollouts", key, key, env)] = statistics.fmean(ratios)


def oracle_rollouts(out, s, env, kept):
    for key, col in oracle_tokens(s).items():
        oracle_moments(out, "rollouts", key, env, [col[i] for i in kept if math.isfinite(col[i])])
    if s.stop_length is not None:
        stops = [s.stop_length[i] for i in kept if math.isfinite(s.stop_length[i])]
        if stops:
            pct = 100.0 * sum(1 for x in stops if x == 1) / len(stops)
            out[("rollouts", "stop_reason_length_pct", "stop_reason_length_pct", env)] = pct
    if s.completion_tokens is not None:
        oracle_lengths(out, s, env, kept)
    if s.off_policy_steps is not None:
        lags = [s.off_policy_steps[i] for i in kept if math.isfinite(s.off_policy_steps[i])]
        if lags:
            out[("rollouts", "off_policy_steps", "mean", env)] = statistics.fmean(lags)
        if len(lags) > 1:
            out[("rollouts", "off_policy_steps", "std", env)] = statistics.stdev(lags)


def oracle_discarded(out, s, env, members):
    dropped = [i for i in members if s.discard[i] != KEPT]
    if env is not None and not dropped:
        return
    n_async = sum(1 for i in members if s.discard[i] == MAX_ASYNC)
    zero = [i for i in members if s.discard[i] == ZERO_ADVANTAGE]
    count = n_async + len(zero)
    out[("discarded", "discarded", "count", env)] = float(count)
    canceled = sum(1 for i in members if s.discard[i] == CANCELED)
    out[("discarded", "discarded", "canceled", env)] = float(canceled)
    if count:
        out[("discarded", "discarded", "max_async_pct", env)] = 100.0 * n_async / count
        out[("discarded", "discarded", "zero_advantage_pct", env)] = 100.0 * len(zero) / count
    rewards = [s.reward[i] for i in zero if math.isfinite(s.reward[i])]
    if rewards:
        share = 100.0 / len(rewards)
        out[("discarded", "zero_advantage", "reward_zero_pct", env)] = share * sum(
            r == 0 for r in rewards
        )
        out[("discarded", "zero_advantage", "reward_positive_pct", env)] = share * sum(
            r > 0 for r in rewards
        )
        out[("discarded", "zero_advantage", "reward_mean", env)] = statistics.fmean(rewards)
    for key, col in oracle_tokens(s).items():
        vals = [col[i] for i in dropped if math.isfinite(col[i])]
        oracle_moments(out, "discarded", key, env, vals)


def oracle_ranges(out, s, ranges, env, kept, key, col, metric):
    at_min = with_min = at_max = with_max = outside = with_any = 0
    for i in kept:
        lo, hi = declared_bounds(s, ranges, i, metric)
        if not math.isfinite(col[i]) or (lo is None and hi is None):
            continue
        v = col[i]
        with_any += 1
        outside += (lo is not None and v < lo) or (hi is not None and v > hi)
        if lo is not None:
            with_min += 1
            at_min += v == lo
        if hi is not None:
            with_max += 1
            at_max += v == hi
    if with_min:
        out[("ranges", key, "at_min_pct", env)] = 100.0 * at_min / with_min
    if with_max:
        out[("ranges", key, "at_max_pct", env)] = 100.0 * at_max / with_max
    if with_any:
        out[("ranges", key, "outside_count", env)] = float(outside)


def oracle(s: StepSamples, ranges: dict[str, EnvRanges]) -> dict:
    """Every series, recomputed sample by sample from the docs/statistics.md definitions."""
    out: dict = {}
    codes = sorted({int(e) for e in s.env if e >= 0})
    scopes = [(None, None, list(range(s.n)))]
    scopes += [(s.env_names[e], e, [i for i in range(s.n) if s.env[i] == e]) for e in codes]
    valued = [("reward", "reward", s.reward, None)]
    valued += [("sample", m, col, m) for m, col in s.metrics.items()]
    for env, code, members in scopes:
        kept = [i for i in members if s.discard[i] == KEPT]
        for kind, key, col, metric in valued:
            oracle_values(out, s, ranges, env, kept, kind, key, col, metric)
            oracle_ranges(out, s, ranges, env, kept, key, col, metric)
        if s.advantage is not None:
            adv = [s.advantage[i] for i in kept if math.isfinite(s.advantage[i])]
            oracle_moments(out, "advantage", "advantage", env, adv)
        oracle_groups(out, s, ranges, env, code, kept)
        oracle_rollouts(out, s, env, kept)
        oracle_discarded(out, s, env, members)
    return out


# ---------------------------------------------------------------------------------------------
# Random steps.

SPECIAL = [0.0, 1.0, 0.5, -1.0, 2.0, NAN]
values = st.one_of(
    st.sampled_from(SPECIAL),
    st.integers(-64, 64).map(lambda k: k / 8),
    st.floats(-100, 100, allow_nan=False, allow_subnormal=False),
)
token_counts = st.one_of(st.sampled_from([0.0, NAN]), st.integers(0, 50).map(float))
METRIC_NAMES = ["correct", "steps", "tool_calls"]


@st.composite
def value_column(draw, n: int, group: list[int], n_groups: int) -> list[float]:
    """Values per sample; sometimes one value per group so that all-equal groups are common."""
    if draw(st.booleans()):
        per_group = draw(st.lists(values, min_size=n_groups, max_size=n_groups))
        return [per_group[g] for g in group]
    return draw(st.lists(values, min_size=n, max_size=n))


@st.composite
def optional_column(draw, n: int, elements) -> list[float] | None:
    if draw(st.booleans()):
        return None
    return draw(st.lists(elements, min_size=n, max_size=n))


@st.composite
def env_ranges(draw, metric_names: list[str]) -> EnvRanges:
    bound = st.sampled_from([None, 0.0, -1.0, 0.5, 1.0])
    metrics = {}
    for m in draw(st.lists(st.sampled_from(metric_names), unique=True)) if metric_names else []:
        metrics[m] = MetricRange(min=draw(bound), max=draw(st.sampled_from([None, 1.0, 2.0])))
    return EnvRanges(
        reward_min=draw(bound), reward_max=draw(st.sampled_from([None, 1.0, 2.0])), metrics=metrics
    )


@st.composite
def steps(draw) -> tuple[StepSamples, dict[str, EnvRanges]]:
    n = draw(st.integers(1, 60))
    n_envs = draw(st.integers(0, 3))
    n_groups = draw(st.integers(1, n))
    group = draw(st.lists(st.integers(0, n_groups - 1), min_size=n, max_size=n))
    env_code = st.integers(-1, n_envs - 1)
    if draw(st.booleans()):  # environments follow groups, as in real runs
        per_group = draw(st.lists(env_code, min_size=n_groups, max_size=n_groups))
        env = [per_group[g] for g in group]
    else:
        env = draw(st.lists(env_code, min_size=n, max_size=n))
    codes = st.sampled_from([KEPT, KEPT, KEPT, KEPT, MAX_ASYNC, ZERO_ADVANTAGE, CANCELED])
    discard = draw(st.lists(codes, min_size=n, max_size=n))
    metric_names = draw(st.lists(st.sampled_from(METRIC_NAMES), unique=True, max_size=3))
    step = make_step(
        draw(value_column(n, group, n_groups)),
        group,
        env,
        [f"env{k}" for k in range(n_envs)],
        discard,
        advantage=draw(optional_column(n, values)),
        prompt_tokens=draw(optional_column(n, token_counts)),
        completion_tokens=draw(optional_column(n, token_counts)),
        stop_length=draw(optional_column(n, st.sampled_from([0.0, 1.0, NAN]))),
        off_policy_steps=draw(optional_column(n, st.sampled_from([0.0, 1.0, 2.0, 3.0, NAN]))),
        metrics={m: draw(value_column(n, group, n_groups)) for m in metric_names},
    )
    names = [f"env{k}" for k in range(n_envs)] + ["not_in_step"]
    declaring = draw(st.lists(st.sampled_from(names), unique=True))
    return step, {name: draw(env_ranges(metric_names)) for name in declaring}


def assert_same_series(got: dict, want: dict) -> None:
    extra, missing = set(got) - set(want), set(want) - set(got)
    assert not extra and not missing, (sorted(extra, key=str), sorted(missing, key=str))
    for key, value in got.items():
        assert type(value) is float, key
        assert np.isclose(value, want[key], rtol=1e-9, atol=1e-12), (key, value, want[key])


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps())
def test_aggregate_step_matches_the_loop_oracle(case):
    step, ranges = case
    raw = {k: v for k, v in aggregate_step(step, ranges).items()
           if not (k[2] or "").startswith("norm:")}  # the normalized family: test_normalized
    assert_same_series(raw, oracle(step, ranges))


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 6), values, st.sampled_from([0.0, -1.0, 0.5])), max_size=40)
)
def test_group_gini_matches_the_double_sum(rows):
    values_ = np.array([v for _, v, _ in rows], dtype=np.float64)
    groups = np.array([g for g, _, _ in rows], dtype=np.int64)
    lo = np.array([lo for _, _, lo in rows], dtype=np.float64)
    by_group = defaultdict(list)
    for g, v, low in rows:
        by_group[g].append((v, low))
    want = oracle_gini(by_group)
    got = group_gini(values_, groups, lo)
    assert got[1:] == want[1:]
    assert (got[0] is None) == (want[0] is None)
    if got[0] is not None:
        assert type(got[0]) is float
        assert np.isclose(got[0], want[0], rtol=1e-9, atol=1e-12)
        assert 0.0 <= got[0] < 1.0


# ---------------------------------------------------------------------------------------------
# Hand-computed cases.


def test_gini_of_one_winner_is_n_minus_1_over_n():
    assert group_gini(np.array([0.0, 0.0, 0.0, 1.0]), np.zeros(4, dtype=np.int64), 0.0) == (
        0.75,
        1,
        0,
    )


# 7 × 0.3 and 8 × 123.456: the sorted-rank sum rounds to a tiny non-zero, yet the Gini is 0.
@pytest.mark.parametrize(
    ("value", "n", "lo"), [(3.0, 5, 0.0), (0.3, 7, 0.0), (123.456, 8, 0.0), (-2.0, 5, -3.0)]
)
def test_gini_of_an_all_equal_group_is_exactly_zero(value, n, lo):
    gini, included, excluded = group_gini(np.full(n, value), np.zeros(n, dtype=np.int64), lo)
    assert (gini, included, excluded) == (0.0, 1, 0)


def test_gini_of_all_zero_group_is_zero():
    assert group_gini(np.zeros(3), np.zeros(3, dtype=np.int64), 0.0) == (0.0, 1, 0)


def test_declared_lo_shifts_values_before_gini():
    one_group = np.zeros(2, dtype=np.int64)
    assert group_gini(np.array([1.0, 2.0]), one_group, 1.0) == (0.5, 1, 0)
    assert group_gini(np.array([1.0, 2.0]), one_group, 0.0)[0] == pytest.approx(1 / 6)


def test_groups_with_a_value_below_lo_are_excluded_and_counted():
    values = np.array([-1.0, 1.0, 0.0, 1.0])
    assert group_gini(values, np.array([0, 0, 1, 1]), 0.0) == (0.5, 1, 1)


def test_single_sample_groups_are_excluded_and_counted():
    values = np.array([5.0, 1.0, 3.0])
    assert group_gini(values, np.array([0, 1, 1]), 0.0) == (0.25, 1, 1)


def test_nan_values_are_dropped_before_grouping():
    # Group 0 keeps one value (excluded); group 1 has none left (not counted at all).
    values = np.array([2.0, NAN, NAN, NAN, 0.0, 1.0])
    assert group_gini(values, np.array([0, 0, 1, 1, 2, 2]), 0.0) == (0.5, 1, 1)


def test_gini_mean_is_unweighted_over_groups():
    values = np.array([0.0, 1.0, 0.0, 0.0, 0.0, 1.0])
    assert group_gini(values, np.array([0, 0, 1, 1, 1, 1]), 0.0) == (0.625, 2, 0)


def test_gini_of_no_finite_value_is_none():
    assert group_gini(np.array([NAN]), np.array([0]), 0.0) == (None, 0, 0)


def test_reward_gini_uses_each_envs_declared_min():
    step = make_step([1.0, 2.0, 1.0, 2.0], [0, 0, 1, 1], [0, 0, 1, 1], ["a", "b"])
    out = aggregate_step(step, {"a": EnvRanges(reward_min=1.0)})
    assert out[("reward", "reward", "gini_mean", "a")] == 0.5
    assert out[("reward", "reward", "gini_mean", "b")] == pytest.approx(1 / 6)
    assert out[("reward", "reward", "gini_mean", None)] == pytest.approx((0.5 + 1 / 6) / 2)


def test_std_is_absent_with_one_sample():
    out = aggregate_step(make_step([0.5], advantage=[0.1], off_policy_steps=[2.0]), {})
    assert out[("reward", "reward", "mean", None)] == 0.5
    assert out[("reward", "reward", "count", None)] == 1.0
    stds = [key for key in out if key[2] == "std"]
    assert stds == []
    assert ("rollouts", "off_policy_steps", "mean", None) in out


def test_reward_stats_skip_nan_and_count_it():
    out = aggregate_step(make_step([1.0, NAN, 3.0]), {})
    assert out[("reward", "reward", "mean", None)] == 2.0
    assert out[("reward", "reward", "std", None)] == pytest.approx(math.sqrt(2))
    assert out[("reward", "reward", "count", None)] == 2.0
    assert out[("reward", "reward", "null_count", None)] == 1.0


def test_a_statistic_without_values_is_absent_not_nan():
    out = aggregate_step(make_step([NAN, NAN], [0, 0]), {})
    assert out[("reward", "reward", "count", None)] == 0.0
    assert ("reward", "reward", "mean", None) not in out
    assert ("reward", "reward", "gini_mean", None) not in out
    assert ("reward", "reward", "gini_excluded", None) not in out
    assert not any(math.isnan(v) for v in out.values())


def test_groups_are_counted_by_kind():
    reward = [0.0, 1.0, 0.0, 0.0, 1.0, 1.0, 0.5, 0.5, 7.0, NAN, 2.0]
    group = [0, 0, 1, 1, 2, 2, 3, 3, 4, 5, 6]
    discard = [KEPT] * 10 + [MAX_ASYNC]
    out = aggregate_step(make_step(reward, group, discard=discard), {})
    counts = {key[2]: v for key, v in out.items() if key[0] == "groups"}
    # Group 4 (one sample) is tied; group 5 (NaN only) and group 6 (discarded) are no groups.
    assert counts == {"count": 5.0, "informative": 1.0, "tied": 4.0, "all_min": 1.0, "all_max": 1.0}


def test_all_min_and_all_max_follow_the_declared_range():
    step = make_step([-1.0, -1.0, 1.0, 1.0, 2.0, 2.0], [0, 0, 1, 1, 2, 2], [0] * 6, ["e"])
    out = aggregate_step(step, {"e": EnvRanges(reward_min=-1.0, reward_max=2.0)})
    assert out[("groups", "groups", "all_min", "e")] == 1.0
    assert out[("groups", "groups", "all_max", "e")] == 1.0
    assert out[("groups", "groups", "tied", None)] == 3.0


def test_stop_reason_length_pct_is_over_known_stop_reasons():
    out = aggregate_step(make_step([0.0] * 4, stop_length=[1.0, 0.0, 0.0, NAN]), {})
    key = ("rollouts", "stop_reason_length_pct", "stop_reason_length_pct", None)
    assert out[key] == pytest.approx(100 / 3)


def test_max_median_ratio_skips_groups_with_zero_median():
    completion = [1.0, 2.0, 10.0, 0.0, 0.0, 0.0, 0.0, 4.0, 7.0, 3.0, 5.0]
    group = [0, 0, 0, 1, 1, 2, 2, 2, 3, 4, 4]
    out = aggregate_step(make_step([0.0] * 11, group, completion_tokens=completion), {})
    # Group 0: 10/2; group 1: max 0 → 1; group 2: median 0, max 4 → left out; group 3 → 1;
    # group 4: 5/4 (median of an even group is the mean of the middle two).
    key = "group_length_max_median_ratio_mean"
    assert out[("rollouts", key, key, None)] == pytest.approx((5 + 1 + 1 + 1.25) / 4)


def test_total_tokens_need_both_counts():
    step = make_step([0.0] * 3, prompt_tokens=[10.0, NAN, 30.0], completion_tokens=[1.0, 2.0, 3.0])
    out = aggregate_step(step, {})
    assert out[("rollouts", "total_tokens", "mean", None)] == 22.0
    assert out[("rollouts", "prompt_tokens", "mean", None)] == 20.0
    assert out[("rollouts", "completion_tokens", "mean", None)] == 2.0
    no_prompt = aggregate_step(make_step([0.0], completion_tokens=[1.0]), {})
    assert ("rollouts", "total_tokens", "mean", None) not in no_prompt


def test_discarded_percentages_and_zero_advantage_breakdown():
    reward = [0.3, 5.0, 0.0, 1.0, NAN, 9.0]
    discard = [KEPT, MAX_ASYNC, ZERO_ADVANTAGE, ZERO_ADVANTAGE, ZERO_ADVANTAGE, CANCELED]
    step = make_step(reward, discard=discard, completion_tokens=[1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    out = aggregate_step(step, {})
    got = {key[1:3]: v for key, v in out.items() if key[0] == "discarded"}
    assert got[("discarded", "count")] == 4.0
    assert got[("discarded", "max_async_pct")] == 25.0
    assert got[("discarded", "zero_advantage_pct")] == 75.0
    assert got[("discarded", "canceled")] == 1.0
    assert got[("zero_advantage", "reward_zero_pct")] == 50.0
    assert got[("zero_advantage", "reward_positive_pct")] == 50.0
    assert got[("zero_advantage", "reward_mean")] == 0.5
    # Token stats cover every discarded sample, canceled included.
    assert got[("completion_tokens", "mean")] == 4.0
    assert got[("completion_tokens", "max")] == 6.0
    # Discarded samples feed no kept family.
    assert out[("reward", "reward", "count", None)] == 1.0


def test_discarded_count_is_zero_overall_and_absent_per_env_without_discards():
    out = aggregate_step(make_step([1.0, 0.0], env=[0, 0], env_names=["e"]), {})
    assert out[("discarded", "discarded", "count", None)] == 0.0
    assert out[("discarded", "discarded", "canceled", None)] == 0.0
    assert ("discarded", "discarded", "max_async_pct", None) not in out
    assert not any(key[0] == "discarded" and key[3] == "e" for key in out)


def test_samples_without_env_count_only_overall():
    step = make_step([1.0, 3.0, 5.0], env=[0, 0, -1], env_names=["e", "unused"])
    out = aggregate_step(step, {})
    assert out[("reward", "reward", "mean", None)] == 3.0
    assert out[("reward", "reward", "mean", "e")] == 2.0
    assert {key[3] for key in out} == {None, "e"}


def test_ranges_count_at_min_at_max_and_outside():
    reward = [0.0, 0.0, 2.0, 3.0, -1.0, 9.0]
    env = [0, 0, 0, 0, 0, 1]
    step = make_step(reward, env=env, env_names=["e", "free"])
    out = aggregate_step(step, {"e": EnvRanges(reward_min=0.0, reward_max=2.0)})
    assert out[("ranges", "reward", "at_min_pct", "e")] == 40.0
    assert out[("ranges", "reward", "at_max_pct", "e")] == 20.0
    assert out[("ranges", "reward", "outside_count", "e")] == 2.0
    # Overall leaves the undeclared environment out of the denominator.
    assert out[("ranges", "reward", "at_min_pct", None)] == 40.0
    assert out[("ranges", "reward", "outside_count", None)] == 2.0
    assert not any(key[0] == "ranges" and key[3] == "free" for key in out)


def test_sample_metric_with_declared_range_gets_range_series():
    step = make_step([0.0, 0.0], [0, 0], [0, 0], ["e"], metrics={"correct": [1.0, 0.0]})
    ranges = {"e": EnvRanges(metrics={"correct": MetricRange(min=0.0, max=1.0)})}
    out = aggregate_step(step, ranges)
    assert out[("ranges", "correct", "at_max_pct", "e")] == 50.0
    assert out[("sample", "correct", "gini_mean", "e")] == 0.5
    assert ("ranges", "reward", "at_min_pct", None) not in out


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 300), st.floats(-1e6, 1e6) | st.just(math.inf)),
                max_size=120),
       st.booleans())
def test_sort_within_groups_orders_by_group_then_value(rows, sort_codes_first):
    """Every path (equal-size rows, padded rows, codes out of order, uneven sizes and
    non-finite values falling back to one sort) orders exactly like lexsort."""
    if sort_codes_first:
        rows = sorted(rows, key=lambda r: r[0])
    codes = np.array([c for c, _ in rows], dtype=np.int64)
    x = np.array([v for _, v in rows], dtype=np.float64)
    order = sort_within_groups(x, codes)
    want = np.lexsort((x, codes))
    assert sorted(order.tolist()) == list(range(len(rows)))  # a permutation
    assert codes[order].tolist() == codes[want].tolist()
    assert x[order].tolist() == x[want].tolist()


def test_sort_within_groups_equal_and_padded_rows():
    x = np.array([3.0, 1.0, 2.0, 9.0, 8.0, 7.0, 5.0])
    same_size = sort_within_groups(x[:6], np.array([0, 0, 0, 1, 1, 1]))
    assert same_size.tolist() == [1, 2, 0, 5, 4, 3]
    padded = sort_within_groups(x, np.array([0, 0, 0, 1, 1, 1, 2]))
    assert padded.tolist() == [1, 2, 0, 5, 4, 3, 6]


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 6), st.integers(1, 9), st.data())
def test_group_gini_of_equal_size_groups_matches_the_double_sum(n_groups, size, data):
    """Groups of one size take the 2-D path of gini_per_group; shuffled, so the sort runs."""
    values_ = np.array(data.draw(st.lists(values, min_size=n_groups * size,
                                          max_size=n_groups * size)), dtype=np.float64)
    groups = np.array(data.draw(st.permutations(np.repeat(np.arange(n_groups), size).tolist())),
                      dtype=np.int64)
    by_group = defaultdict(list)
    for g, v in zip(groups.tolist(), values_.tolist(), strict=True):
        by_group[g].append((v, 0.0))
    want = oracle_gini(by_group)
    got = group_gini(values_, groups, 0.0)
    assert got[1:] == want[1:]
    if want[0] is not None:
        assert np.isclose(got[0], want[0], rtol=1e-9, atol=1e-12)


# ---------------------------------------------------------------------------------------------
# Huge finite values: their sums overflow, the statistics must not.

BIG = 2.0**1023  # 8.98e307: exact halves and doubles, so the expected values are exact


def test_moments_of_huge_values_do_not_overflow():
    out = aggregate_step(make_step([1e308, 1e308], [0, 0], metrics={"m": [1e308, -1e308]}), {})
    assert out[("reward", "reward", "mean", None)] == 1e308
    assert out[("reward", "reward", "std", None)] == 0.0
    assert out[("sample", "m", "mean", None)] == 0.0
    assert out[("sample", "m", "std", None)] == math.sqrt(2) * 1e308
    wide = aggregate_step(make_step([1.9 * BIG, -1.9 * BIG]), {})  # std 2.4e308: no float64
    assert wide[("reward", "reward", "mean", None)] == 0.0
    assert ("reward", "reward", "std", None) not in wide
    four = aggregate_step(make_step([1.5 * BIG, -1.5 * BIG, -1.5 * BIG, -1.5 * BIG]), {})
    assert four[("reward", "reward", "mean", None)] == -0.75 * BIG
    assert four[("reward", "reward", "std", None)] == 1.5 * BIG  # sqrt((2.25 + 3 × 0.25) / 3)


def test_the_gini_of_huge_values_is_that_of_the_same_values_scaled_down():
    huge = aggregate_step(make_step([0.5 * BIG, BIG], [0, 0]), {})
    small = aggregate_step(make_step([0.5, 1.0], [0, 0]), {})
    key = ("reward", "reward", "gini_mean", None)
    assert huge[key] == small[key] == 0.5 / 3
    # v − lo overflows (1e308 above a declared −1e308): the Gini of (v − lo) / 2.
    out = aggregate_step(make_step([-1e308, 1e308], [0, 0], [0, 0], ["e"]),
                         {"e": EnvRanges(reward_min=-1e308)})
    assert out[key] == 0.5


def test_the_normalized_family_of_a_huge_range_does_not_overflow():
    step = make_step([-1e308, 1e308, 0.0], [0, 0, 0], [0, 0, 0], ["e"])
    out = aggregate_step(step, {"e": EnvRanges(reward_min=-1e308, reward_max=1e308)})
    got = {k[2]: v for k, v in out.items() if k[0] == "reward" and k[3] is None}
    assert (got["norm:min"], got["norm:max"], got["norm:mean"]) == (0.0, 1.0, 0.5)


def test_discarded_reward_mean_and_length_ratios_of_huge_values_do_not_overflow():
    step = make_step([1e308, 1e308, 0.0, 0.0, 0.0, 0.0], [0, 0, 1, 1, 2, 2],
                     discard=[ZERO_ADVANTAGE] * 2 + [KEPT] * 4,
                     completion_tokens=[1.0, 1.0, BIG, BIG, 1.0, BIG])
    out = aggregate_step(step, {})
    assert out[("discarded", "zero_advantage", "reward_mean", None)] == 1e308
    # Group 1: max / median = 1 (the median's sum overflowed); group 2: BIG / ((1 + BIG)/2).
    key = "group_length_max_median_ratio_mean"
    assert out[("rollouts", key, key, None)] == (1.0 + 2.0) / 2
    # Two groups of ratio BIG: their sum overflows, their mean is BIG.
    ratios = aggregate_step(make_step([0.0] * 6, [0, 0, 0, 1, 1, 1],
                                      completion_tokens=[1.0, 1.0, BIG] * 2), {})
    assert ratios[("rollouts", key, key, None)] == BIG
