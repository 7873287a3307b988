"""Bit-for-bit properties of ingest.pipeline.aggregate that re-aggregation relies on: a stored
value is rewritten only when it changes, so the same samples must give the same float64 bits
whichever way they are aggregated — the normalized family alone (`normalized_steps`, a widened
observed range) or with the rest (`aggregate_steps`), one step or many in one pass. Seeded
random steps with NaN, ±inf, ±0, values near 1e308, ties, single-sample groups, groups out of
order or mixing environments, discards, metrics some steps lack, declared, inverted and
degenerate ranges."""

from __future__ import annotations

import numpy as np
import pytest

from ingest.core.normalize import Observed
from ingest.core.ranges import EnvRanges, MetricRange
from ingest.core.samples import SeriesKey, StepSamples
from ingest.pipeline.aggregate import Table, aggregate_steps, normalized_steps
from tests.unit.test_many_steps import stack

ODD = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -2.0, 5e-324,
                1e308, -1e308, 1e154, 2.0**1023])
BOUNDS = [None, 0.0, -1.0, 0.5, 1.0, 2.0]


def bound(rng: np.random.Generator) -> float | None:
    return BOUNDS[int(rng.integers(len(BOUNDS)))]


def values(rng: np.random.Generator, group: np.ndarray) -> np.ndarray:
    kind = rng.integers(0, 3)
    if kind == 0:
        v = rng.normal(0.4, 1.0, group.size)
    elif kind == 1:
        v = rng.integers(0, 3, group.size).astype(float)  # ties, all-equal groups
    else:
        v = rng.normal(0.0, 1.0, group.max() + 1)[group]  # one value per group
    odd = rng.random(group.size) < rng.choice([0.0, 0.05, 0.3])
    v[odd] = rng.choice(ODD, int(odd.sum()))
    return v


def one_step(rng: np.random.Generator, names: list[str], metrics: list[str]) -> StepSamples:
    sizes = rng.integers(1, 6, rng.integers(1, 8)) if rng.random() < 0.5 else np.full(
        rng.integers(1, 8), rng.choice([1, 2, 4]))
    group = np.repeat(np.arange(sizes.size), sizes)
    if not names:
        env = np.full(group.size, -1)
    elif rng.random() < 0.6:  # environments follow groups, sometimes interleaved
        env = rng.integers(-1, len(names), sizes.size)[group]
    else:
        env = rng.integers(-1, len(names), group.size)
    if rng.random() < 0.2:
        shuffle = rng.permutation(group.size)
        group, env = group[shuffle], env[shuffle]
    n = group.size
    discard = np.where(rng.random(n) < rng.choice([0.0, 0.2, 1.0]), rng.integers(1, 4, n), 0)
    tokens = rng.choice([0.0, 1.0, 7.0, 40.0, np.nan], n)
    return StepSamples(
        reward=values(rng, group), group=group, env=env, env_names=names,
        discard=discard.astype(np.int8), completion_tokens=tokens, prompt_tokens=tokens[::-1],
        advantage=values(rng, group) if rng.random() < 0.5 else None,
        metrics={m: values(rng, group) for m in metrics if rng.random() < 0.8})


def case(seed: int) -> tuple[list[StepSamples], dict[str, EnvRanges], Observed]:
    rng = np.random.default_rng(seed)
    names = sorted(rng.choice(["a", "b", "c"], rng.integers(0, 4), replace=False).tolist())
    metrics = ["m0", "m1", "m2"][:rng.integers(0, 4)]
    steps = [one_step(rng, names, metrics) for _ in range(rng.integers(1, 5))]
    ranges = {}
    for name in names:
        if rng.random() < 0.7:
            declared = {m: MetricRange(bound(rng), bound(rng), bool(rng.random() < 0.4))
                        for m in metrics}
            ranges[name] = EnvRanges(bound(rng), bound(rng), declared)
    observed: Observed = {}
    for name in [*names, ""]:
        for kind, key in [("reward", "reward"), *(("sample", m) for m in metrics)]:
            if rng.random() < 0.8:
                lo, hi = sorted(rng.choice([-1.0, 0.0, 0.3, 1.0, 2.0], 2).tolist())
                observed[(name, kind, key)] = (lo, hi)
    return steps, ranges, observed


def columns_of(t: Table) -> dict[SeriesKey, np.ndarray]:
    return {k: t.values[:, j].view(np.uint64) for j, k in enumerate(t.keys)}


def same_bits(got: Table, want: Table) -> None:
    a, b = columns_of(got), columns_of(want)
    assert a.keys() == b.keys(), set(a) ^ set(b)
    for key, bits in a.items():
        assert np.array_equal(bits, b[key]), key


@pytest.mark.parametrize("seed", range(60))
def test_the_normalized_family_alone_has_the_bits_it_has_among_all(seed: int) -> None:
    steps, ranges, observed = case(seed)
    s = stack(steps)
    whole = aggregate_steps(s, ranges, observed)
    norm = [j for j, k in enumerate(whole.keys) if k[2] is not None and k[2].startswith("norm:")]
    alone = normalized_steps(s, ranges, observed)
    same_bits(alone, Table([whole.keys[j] for j in norm], whole.values[:, norm]))


@pytest.mark.parametrize("seed", range(60))
def test_a_pass_of_many_steps_gives_each_step_the_bits_it_has_alone(seed: int) -> None:
    steps, ranges, observed = case(1000 + seed)
    together = aggregate_steps(stack(steps), ranges, observed)
    for i, step in enumerate(steps):
        alone = aggregate_steps(stack([step]), ranges, observed)
        row = Table(together.keys, together.values[i:i + 1])
        present = [j for j, v in enumerate(row.values[0]) if not np.isnan(v)]
        same_bits(Table([row.keys[j] for j in present], row.values[:, present]), alone)


def _step(reward: list[float], group: list[int], env: list[int], names: list[str],
          tokens: list[float] | None = None) -> StepSamples:
    n = len(reward)
    return StepSamples(
        reward=np.array(reward), group=np.array(group), env=np.array(env), env_names=names,
        discard=np.zeros(n, dtype=np.int8),
        completion_tokens=None if tokens is None else np.array(tokens))


def _alone_and_together(a: StepSamples, b: StepSamples, ranges: dict[str, EnvRanges]) -> None:
    """Step a's statistics are the same bits whether step b shares its pass or not."""
    together = aggregate_steps(stack([a, b]), ranges, {})
    alone = aggregate_steps(stack([a]), ranges, {})
    row = Table(together.keys, together.values[:1])
    present = [j for j, v in enumerate(row.values[0]) if not np.isnan(v)]
    same_bits(Table([row.keys[j] for j in present], row.values[:, present]), alone)


def test_an_overflowing_mean_over_groups_does_not_depend_on_another_steps_inf() -> None:
    """Step a's groups have max/median ratios of 1e308, whose sum overflows (the mean is taken
    again on scaled values); step b's one group has an infinite ratio (a huge length over a
    tiny median). Whether a's mean is rescaled is decided for a's cell, not for the pass."""
    a = _step([0.0] * 6, [0, 0, 0, 1, 1, 1], [-1] * 6, [],
              tokens=[1.0, 1.0, 1e308, 1.0, 1.0, 1e308])
    b = _step([0.0] * 3, [0, 0, 0], [-1] * 3, [], tokens=[1e-300, 1e-300, 1e300])
    alone = aggregate_steps(stack([a]), {}, {})
    ratio = alone.keys.index(("rollouts", "group_length_max_median_ratio_mean",
                              "group_length_max_median_ratio_mean", None))
    assert alone.values[0, ratio] == 1e308
    _alone_and_together(a, b, {})


def test_a_gini_shift_that_overflows_halves_only_its_own_groups() -> None:
    """Step b's reward sits 1e308 above its environment's declared minimum of −1e308, so
    v − min overflows and its group's Gini is taken on halved values; step a (another
    environment, floor 0, subnormal rewards that halving would round) keeps its own."""
    names = ["a", "b"]
    a = _step([5e-324, 1.5e-323, 1e-323, 2e-323], [0, 0, 1, 1], [0] * 4, names)
    b = _step([1e308, 0.0], [0, 0], [1, 1], names)
    ranges = {"b": EnvRanges(-1e308, 1e308, {})}
    _alone_and_together(a, b, ranges)
