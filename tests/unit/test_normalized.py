"""The normalized family (ingest.core.normalize, ingest.pipeline.aggregate) against a loop
oracle written from docs/statistics.md "Normalization": each sample mapped by its own
environment's range."""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ingest.core.normalize import Observed, bound
from ingest.core.ranges import EnvRanges, MetricRange
from ingest.core.samples import KEPT, StepSamples
from ingest.pipeline.aggregate import aggregate_step
from tests.unit.test_aggregate import (
    assert_same_series,
    make_step,
    oracle_gini,
    oracle_moments,
    steps,
)


def oracle_normalized(s: StepSamples, ranges: dict[str, EnvRanges], observed: Observed) -> dict:
    out: dict = {}
    columns = [("reward", "reward", s.reward)] + [("sample", m, v) for m, v in s.metrics.items()]
    codes = sorted({int(c) for c in s.env if c >= 0})
    for kind, key, col in columns:
        mapped = {}
        for i in range(s.n):
            v = float(col[i])
            if s.discard[i] != KEPT or not math.isfinite(v):
                continue
            name = s.env_names[s.env[i]] if s.env[i] >= 0 else ""
            env = ranges.get(name, EnvRanges()) if name else EnvRanges()
            declared = (MetricRange(env.reward_min, env.reward_max) if kind == "reward"
                        else env.metrics.get(key, MetricRange()))
            seen = observed.get((name, kind, key))
            lo = declared.min if declared.min is not None else (seen[0] if seen else None)
            hi = declared.max if declared.max is not None else (seen[1] if seen else None)
            if lo is None or hi is None:
                continue
            x = 0.5 if hi == lo else (v - lo) / (hi - lo)
            mapped[i] = 1.0 - x if declared.invert else x
        for code in [None, *codes]:
            env_name = None if code is None else s.env_names[code]
            mine = [i for i in sorted(mapped) if code is None or s.env[i] == code]
            stats: dict = {}
            oracle_moments(stats, kind, key, env_name, [mapped[i] for i in mine])
            for (_, _, stat, _), value in stats.items():
                out[(kind, key, f"norm:{stat}", env_name)] = value
            by_group = defaultdict(list)
            for i in mine:
                by_group[int(s.group[i])].append((mapped[i], 0.0))
            gini, _, _ = oracle_gini(by_group)
            if gini is not None:
                out[(kind, key, "norm:gini_mean", env_name)] = gini
    return out


@st.composite
def normalized_cases(draw):
    """A random step, its declarations (some inverted) and run-wide observed ranges that
    contain the step's own values (sometimes degenerate)."""
    s, ranges = draw(steps())
    for name, r in list(ranges.items()):
        inverted = {m: replace(mr, invert=draw(st.booleans())) for m, mr in r.metrics.items()}
        ranges[name] = replace(r, metrics=inverted)
    observed: Observed = {}
    columns = [("reward", "reward", s.reward)] + [("sample", m, v) for m, v in s.metrics.items()]
    for code in {int(c) for c in s.env}:
        name = s.env_names[code] if code >= 0 else ""
        for kind, key, col in columns:
            vals = [float(col[i]) for i in range(s.n) if s.env[i] == code
                    and s.discard[i] == KEPT and math.isfinite(col[i])]
            if not vals:
                continue
            widen = draw(st.sampled_from([0.0, 0.0, 1.0, 10.0]))
            observed[(name, kind, key)] = (min(vals) - widen, max(vals) + widen)
    return s, ranges, observed


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(normalized_cases())
def test_the_normalized_family_matches_the_per_sample_oracle(case):
    s, ranges, observed = case
    got = {k: v for k, v in aggregate_step(s, ranges, observed).items()
           if (k[2] or "").startswith("norm:")}
    assert_same_series(got, oracle_normalized(s, ranges, observed))


def two_scales() -> StepSamples:
    # countdown rewards on 0–2, math on 0–1: the case ranges exist for
    return make_step([2.0, 1.0, 0.0, 2.0, 1.0, 0.0, 1.0, 1.0], [0, 0, 0, 0, 1, 1, 1, 1],
                     [0, 0, 0, 0, 1, 1, 1, 1], ["countdown", "math"])


def test_all_environments_pool_each_samples_own_normalized_value() -> None:
    ranges = {"countdown": EnvRanges(0.0, 2.0), "math": EnvRanges(0.0, 1.0)}
    out = aggregate_step(two_scales(), ranges, {})
    pooled = (1.0 + 0.5 + 0.0 + 1.0 + 1.0 + 0.0 + 1.0 + 1.0) / 8
    assert out[("reward", "reward", "norm:mean", None)] == pytest.approx(pooled)
    assert out[("reward", "reward", "norm:mean", "countdown")] == pytest.approx(0.625)
    assert out[("reward", "reward", "norm:mean", "math")] == pytest.approx(0.75)
    # the raw overall mean stretched by the widest range (0–2) would say 0.5: wrong
    assert out[("reward", "reward", "mean", None)] / 2 != pytest.approx(pooled)


def test_three_scales_an_undeclared_env_uses_its_observed_range_and_invert_flips() -> None:
    s = make_step([5.0, 15.0, 1.0, 0.0, -3.0, 1.0], [0, 0, 1, 1, 2, 2], [0, 0, 1, 1, 2, 2],
                  ["big", "unit", "free"], metrics={"steps": [0, 5, 10, 5, 3, 4]})
    ranges = {"big": EnvRanges(0.0, 20.0, {"steps": MetricRange(0, 20, invert=True)}),
              "unit": EnvRanges(0.0, 1.0)}
    observed = {("free", "reward", "reward"): (-3.0, 5.0), ("unit", "sample", "steps"): (5, 10),
                ("free", "sample", "steps"): (3.0, 3.0)}
    out = aggregate_step(s, ranges, observed)
    assert out[("reward", "reward", "norm:mean", "free")] == pytest.approx((0.0 + 0.5) / 2)
    assert out[("reward", "reward", "norm:max", None)] == pytest.approx(1.0)
    # inverted on 0–20: steps 0 → 1.0, 5 → 0.75 (not inverted they would be 0.0 and 0.25);
    # "min" is the lowest normalized value
    assert out[("sample", "steps", "norm:min", "big")] == pytest.approx(0.75)
    assert out[("sample", "steps", "norm:max", "big")] == pytest.approx(1.0)
    assert out[("sample", "steps", "norm:mean", "big")] == pytest.approx(0.875)
    # a degenerate observed range (3–3) maps to 0.5
    assert out[("sample", "steps", "norm:mean", "free")] == pytest.approx(0.5)
    assert bound(EnvRanges(), (3.0, 3.0), "sample", "steps").source == "degenerate"
    assert bound(ranges["big"], None, "reward", "reward").source == "declared"
    assert bound(EnvRanges(reward_min=0.0), (0.0, 4.0), "reward", "reward").source == "observed"
