"""Aggregating many steps in one pass (ingest.pipeline.aggregate.aggregate_steps,
ingest.core.columns.assemble_steps) gives, step for step, what aggregating each step alone gives."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ingest.core import columns
from ingest.core.normalize import Observed
from ingest.core.samples import StepSamples
from ingest.pipeline.aggregate import aggregate_step, aggregate_steps
from tests.unit.test_aggregate import steps
from trainer_hooks.wire.protocol import validate_message


def stack(parts: list[StepSamples]) -> StepSamples:
    """Several one-step StepSamples as one: environments united by name, groups offset."""
    names = sorted({n for p in parts for n in p.env_names})
    offset, out = 0, {"reward": [], "group": [], "env": [], "discard": [], "step": []}
    optional = ("advantage", "prompt_tokens", "completion_tokens", "stop_length",
                "off_policy_steps")
    cols: dict[str, list] = {c: [] for c in optional}
    metric_names = sorted({m for p in parts for m in p.metrics})
    metrics: dict[str, list] = {m: [] for m in metric_names}
    for i, p in enumerate(parts):
        remap = np.array([names.index(n) for n in p.env_names] + [-1], dtype=np.int64)
        out["reward"].append(p.reward)
        out["group"].append(p.group + offset)
        offset += int(p.group.max()) + 1
        out["env"].append(remap[p.env])
        out["discard"].append(p.discard)
        out["step"].append(np.full(p.n, i, dtype=np.int64))
        for c in optional:
            v = getattr(p, c)
            cols[c].append(np.full(p.n, np.nan) if v is None else v)
        for m in metric_names:
            metrics[m].append(p.metrics.get(m, np.full(p.n, np.nan)))
    joined = {k: np.concatenate(v) for k, v in out.items()}
    return StepSamples(
        reward=joined["reward"], group=joined["group"], env=joined["env"], env_names=names,
        discard=joined["discard"].astype(np.int8),
        **{c: None if all(getattr(p, c) is None for p in parts) else np.concatenate(cols[c])
           for c in optional},
        metrics={m: np.concatenate(v) for m, v in metrics.items()},
        step=joined["step"], n_steps=len(parts),
        metric_steps={m: np.array([m in p.metrics for p in parts]) for m in metric_names},
    )


@st.composite
def several_steps(draw):
    cases = draw(st.lists(steps(), min_size=1, max_size=4))
    ranges: dict = {}
    for _, r in cases:
        ranges.update(r)
    lo = draw(st.sampled_from([-1.0, 0.0]))
    observed: Observed = {(n, "reward", "reward"): (lo, 2.0)
                          for p, _ in cases for n in [*p.env_names, ""]}
    return [p for p, _ in cases], ranges, observed


def same(got: dict, want: dict) -> None:
    assert set(got) == set(want), (set(got) ^ set(want))
    for key, value in got.items():
        assert np.isclose(value, want[key], rtol=1e-9, atol=1e-12), (key, value, want[key])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(several_steps())
def test_many_steps_at_once_equal_each_step_alone(case):
    parts, ranges, observed = case
    table = aggregate_steps(stack(parts), ranges, observed)
    assert table.values.shape == (len(parts), len(table.keys))
    for i, part in enumerate(parts):
        same(table.row(i), aggregate_step(part, ranges, observed))


def samples_message(step: int, ids: list, groups: list, rewards: list, envs: list,
                    metric: list | None):
    obj = {"v": 1, "id": f"m{step}-{ids[0]}", "type": "samples", "run": "r",
           "step": [step] * len(ids), "sample_id": ids, "group_id": groups,
           "reward": rewards, "env": envs}
    if metric is not None:
        obj["metrics"] = {"correct": metric}
    return validate_message(obj)


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_assembling_many_steps_keeps_each_steps_canonical_order(data):
    per_step = []
    for step in range(data.draw(st.integers(1, 4))):
        n = data.draw(st.integers(1, 12))
        as_text = data.draw(st.booleans())  # steps with string ids beside steps with integers
        ids = [str(i) if as_text else i for i in range(n)]
        groups = data.draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
        rewards = data.draw(st.lists(st.sampled_from([0.0, 0.5, 1.0]), min_size=n, max_size=n))
        envs = data.draw(st.lists(st.sampled_from(["a", "b"]), min_size=n, max_size=n))
        metric = data.draw(st.none() | st.lists(st.just(1.0), min_size=n, max_size=n))
        cut = data.draw(st.integers(0, n))  # two messages, two batches (the first may be empty)
        batches = []
        for part in (slice(0, cut), slice(cut, n)):
            if part.start == part.stop:
                continue
            msg = samples_message(step, ids[part], groups[part], rewards[part], envs[part],
                                  None if metric is None else metric[part])
            [(stored_step, size, blob)] = columns.encode_steps(msg)
            assert (stored_step, size) == (step, part.stop - part.start)
            batches.append(columns.unpack(blob))
        per_step.append(batches)
    together, _ = columns.assemble_steps(per_step)
    assert together.n_steps == len(per_step)
    for i, batches in enumerate(per_step):
        alone, _ = columns.assemble_steps([batches])
        mine = together.step == i
        np.testing.assert_array_equal(together.reward[mine], alone.reward)
        np.testing.assert_array_equal(together.discard[mine], alone.discard)
        names = np.array([*together.env_names, ""])
        alone_names = np.array([*alone.env_names, ""])
        np.testing.assert_array_equal(names[together.env[mine]], alone_names[alone.env])
        groups = together.group[mine]
        np.testing.assert_array_equal(groups - groups.min(), alone.group)
        if "correct" in together.metrics:
            assert together.metric_steps["correct"][i] == ("correct" in alone.metrics)
        else:
            assert not alone.metrics
    firsts = [together.group[together.step == i].min() for i in range(len(per_step))]
    lasts = [together.group[together.step == i].max() for i in range(len(per_step))]
    assert all(last < first for last, first in zip(lasts[:-1], firsts[1:], strict=True))


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_canonical_order_sorts_like_lexsort_and_spares_sorted_input(data):
    """The linear check of columns.canonical_order: input already in order is left as it is
    (no gather), anything else sorts as the lexsort would (ties are duplicates)."""
    n = data.draw(st.integers(0, 40))
    step = np.sort(np.array(data.draw(st.lists(st.integers(0, 2), min_size=n, max_size=n)),
                            dtype=np.int64))
    group = np.array(data.draw(st.lists(st.integers(0, 3), min_size=n, max_size=n)),
                     dtype=np.int64)
    sample = np.array(data.draw(st.lists(st.integers(-5, 5), min_size=n, max_size=n)),
                      dtype=np.int64)
    reward = np.array(data.draw(st.lists(st.sampled_from([0.0, 0.5, 1.0, np.nan]),
                                         min_size=n, max_size=n)), dtype=np.float64)
    want = np.lexsort((reward, sample, group, step))
    if data.draw(st.booleans()):  # hand it the input in order already
        step, group, sample, reward = step[want], group[want], sample[want], reward[want]
        want = np.arange(n)
    order = columns.canonical_order(step, group, sample, reward)
    keys = np.stack([step, group, sample, reward]).T
    np.testing.assert_array_equal(keys[order.take(np.arange(n))], keys[want])
    if np.array_equal(want, np.arange(n)) and not np.isnan(reward).any():
        assert order.index is None  # nothing sorted, nothing gathered
