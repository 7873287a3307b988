"""ingest.core.timeline's implementation: hand-computed cases of the choices its docstring makes
(several ranks, windows that go backwards, reserved series names, whole buckets), properties
(row order, label order and how the events were split into stored batches change nothing; a
window's buckets are the run's), and its interval primitives (ingest.core.intervals) against
brute force. The oracle comparison is tests/unit/test_timeline_oracle.py."""

from __future__ import annotations

import math
import random
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ingest.core import eventstore as es
from ingest.core import intervals
from ingest.core import timeline as tl
from tests.support.timeline_oracle import ev, table

NAN = math.nan


def series(t: tl.EventTable, lanes: int | None = None) -> dict[str, dict[int, float]]:
    """{key: {step: value}} of the points that exist, plus "time"."""
    got = tl.step_series(t, lanes)
    out: dict[str, dict[int, float]] = {"time": dict(zip(got.steps.tolist(), got.times.tolist(),
                                                         strict=True))}
    for j, key in enumerate(got.keys):
        col = got.values[:, j]
        out[key] = {int(s): float(v) for s, v in zip(got.steps, col, strict=True)
                    if not math.isnan(v)}
    return out


def two_ranks() -> list[dict[str, Any]]:
    """Steps 0 and 1 on ranks 0, 1 and a null rank; saves at 0.5 and 8; generations on two
    lanes of s0; inference weight syncs on s0 and s1 for step 0."""
    inf = {"source": "inference", "server": "s0"}
    rows = [ev("training_loop_start", 0.0, source="orchestrator")]
    for rank, scale in ((0, 1.0), (1, 1.5), (None, 0.5)):
        rows += [ev("forward", 1.0, 1.0 + scale, step=0, rank=rank),
                 ev("forward", 1.0 + scale, 1.0 + 2 * scale, step=0, rank=rank),
                 ev("backward", 4.0, 4.0 + scale, step=0, rank=rank),
                 ev("forward", 10.0, 10.0 + scale, step=1, rank=rank)]
    rows += [
        ev("forward", 11.0, 11.2, step=1, rank=0),
        ev("weight_broadcast", 6.0, 7.0, step=0, rank=0),
        ev("save_batch", 0.5, source="orchestrator", step=0),
        ev("save_batch", 8.0, source="orchestrator", step=1),
        ev("generation", 0.2, 0.4, slot=0, status="normal", tokens=10, **inf),
        ev("generation", 0.3, 1.0, slot=0, **inf),
        ev("generation", 2.0, 6.0, slot=1, status="discarded", **inf),
        ev("generation", 6.0, 9.0, slot=1, status="canceled", **inf),
        ev("generation", 7.0, 7.5, slot=1, status="eval", **inf),
        ev("compute_reward", 1.0, 1.5, source="reward"),
        ev("compute_reward", 7.9, 8.0, source="reward", status="canceled"),
        ev("weight_sync", 6.5, 7.2, source="inference", server="s0", step=0),
        ev("weight_sync", 6.6, 7.4, source="inference", server="s1", step=0),
    ]
    return rows


def test_two_ranks_and_a_null_rank_by_hand() -> None:
    got = series(table(two_ranks()))
    # step 0: trainer events 1 .. 7 (weight_broadcast); step 1: 10 .. 11.5 (rank 1's forward)
    assert got["time"] == {0: 7.0, 1: 11.5}
    assert got["timing_step_active"] == {0: 6.0, 1: 1.5}
    assert got["timing_step_total"] == {0: 7.0, 1: 4.5}
    assert got["timing_waiting_for_data"] == {0: 1.0, 1: 3.0}
    # forward per rank, step 0: 2, 3, 1 → max 3; mean of 6 spans = 6 / 6
    assert got["timing_forward_total"] == {0: 3.0, 1: 1.5}
    assert got["timing_forward_microbatch_mean"] == pytest.approx({0: 1.0, 1: 3.2 / 4})
    assert got["timing_microbatch_count"] == {0: 2.0, 1: 2.0}  # rank 0 has two at step 1
    assert got["timing_backward_total"] == {0: 1.5}
    assert got["timing_weight_broadcast_total"] == {0: 1.0}
    assert got["timing_weight_sync_trainer_total"] == {0: 1.0}
    assert got["timing_weight_sync_inference_total"] == pytest.approx({0: 0.9})
    # windows (0, 0.5] and (0.5, 8], 2 lanes
    assert got["timing_generation_normal_pct"] == pytest.approx({0: 20.0, 1: 100 * 0.5 / 15})
    assert got["timing_generation_discarded_pct"] == pytest.approx({0: 0.0, 1: 100 * 4 / 15})
    assert got["timing_generation_all_pct"] == pytest.approx({0: 20.0, 1: 100 * 5 / 15})
    assert got["timing_compute_reward_all_pct"] == pytest.approx({0: 0.0, 1: 100 * 0.5 / 15})
    assert got["timing_idle_pct"] == pytest.approx({0: 80.0, 1: 100 - 100 * 5.5 / 15})
    assert got["timing_avg_inference_time"] == pytest.approx({0: 0.2, 1: 5.2 / 3})
    assert got["timing_avg_compute_reward_time"] == {1: 0.5}
    # top-level spans of ranks 0 and 1 (the null rank left out): step 0 sums 4 (forwards,
    # backward, weight_broadcast) and 4.5; step 1 sums 1.2 and 1.5
    assert got["timing_rank_spread"] == pytest.approx({0: 4.5 / 4.25, 1: 1.5 / 1.35})
    assert got["timing_slowest_rank"] == {0: 1.0, 1: 1.0}


def test_two_ranks_buckets_by_hand() -> None:
    t = table(two_ranks())
    assert (tl.distinct_servers(t), tl.distinct_ranks(t)) == (2, 3)
    b = tl.buckets(t, 2.0, 0.5, 14.0, lanes=2, servers=2, ranks=3, latest=11.5)
    assert b.time.tolist() == [0.0, 2.0, 4.0, 6.0, 8.0, 10.0, 12.0]
    assert b.partial.tolist() == [False] * 5 + [True, False]
    s = {k: v.tolist() for k, v in b.series.items()}
    assert s["generations"] == [2, 0, 0, 2, 0, 0, 0]
    assert s["generations_canceled"] == [0, 0, 0, 0, 1, 0, 0]
    assert s["tokens_per_second"] == [5.0, 0, 0, 0, 0, 0, 0]
    assert s["inference_utilization_pct"] == pytest.approx([22.5, 50, 50, 62.5, 25, 0, 0])
    assert s["weight_sync_pct"] == pytest.approx([0, 0, 0, 37.5, 0, 0, 0])
    # rank 0: [1, 3) [4, 5) [6, 7) [10, 11.2); rank 1: [1, 4) [4, 5.5) [10, 11.5);
    # null: [1, 2) [4, 4.5) [10, 10.5)
    assert s["trainer_working_pct"] == pytest.approx(
        [100 * (1 + 1 + 1) / 6, 100 * (1 + 2) / 6, 100 * (1 + 1.5 + 0.5) / 6, 100 * 1 / 6, 0,
         100 * (1.2 + 1.5 + 0.5) / 6, 0])
    assert s["trainer_idle_pct"] == pytest.approx([100 - w for w in s["trainer_working_pct"]])


def test_windows_going_backwards() -> None:
    """save_batch times 10, 5, 20, 20: window 1 = (10, 5] and window 3 = (20, 20] are none;
    window 2 = (5, 20] overlaps window 0 = (0, 10], so a generation ending at 8 is in both."""
    rows = [ev("training_loop_start", 0.0, source="orchestrator")]
    rows += [ev("save_batch", at, source="orchestrator", step=i)
             for i, at in enumerate((10.0, 5.0, 20.0, 20.0))]
    rows += [ev("generation", 6.0, 8.0, source="inference", server="a", slot=0),
             ev("generation", 11.0, 14.0, source="inference", server="a", slot=0)]
    got = series(table(rows))
    assert got["time"] == {0: 10.0, 2: 20.0}  # steps 1 and 3 have no point at all
    assert got["timing_generation_all_pct"] == pytest.approx({0: 20.0, 2: 100 * 5 / 15})
    assert got["timing_avg_inference_time"] == pytest.approx({0: 2.0, 2: 2.5})


def test_series_names_defined_here_are_not_taken_by_an_op() -> None:
    rows = [ev("step", 0.0, 2.0, step=0), ev("step", 2.0, 3.0, step=0),
            ev("weight_sync_inference", 3.0, 4.0, step=0)]
    got = series(table(rows))
    assert "timing_step_total" not in got  # no previous step, no loop start: no point
    assert got["timing_step_microbatch_mean"] == {0: 1.5}
    assert got["timing_step_active"] == {0: 4.0}
    assert "timing_weight_sync_inference_total" not in got
    assert got["timing_weight_sync_inference_microbatch_mean"] == {0: 1.0}


def test_an_empty_run_has_no_series() -> None:
    got = tl.step_series(table([]))
    assert got.steps.shape == (0,) and got.keys == [] and got.values.shape == (0, 0)
    assert tl.inference_lanes(table([])) == 0


def test_bucket_edges() -> None:
    t = table([ev("generation", 0.0, 10.0, source="inference", server="a", slot=0)])
    b = tl.buckets(t, 4.0, 5.0, 12.0, lanes=1, servers=1, ranks=0, latest=None)
    assert b.time.tolist() == [4.0, 8.0]  # 12 is an edge: not a bucket of [5, 12)
    assert b.series["generations"].tolist() == [0.0, 1.0]
    assert b.series["inference_utilization_pct"].tolist() == [100.0, 50.0]
    assert np.isnan(b.series["trainer_working_pct"]).all()
    # k · B < t1 with k ≥ floor(t0 / B): [5, 5) still has the bucket [4, 8); [4, 4) none
    assert tl.buckets(t, 4.0, 5.0, 5.0, lanes=1, servers=1, ranks=1, latest=1.0).time.size == 1
    assert tl.buckets(t, 4.0, 4.0, 4.0, lanes=1, servers=1, ranks=1, latest=1.0).time.size == 0
    with pytest.raises(ValueError, match="bucket"):
        tl.buckets(t, 0.0, 0.0, 1.0, lanes=1, servers=1, ranks=1, latest=None)


# ---------------------------------------------------------------- properties


def synthetic(seed: int) -> list[dict[str, Any]]:
    """A few steps of two ranks with microbatches, two servers × 3 slots of generations of
    every status, rewards, inference weight syncs, a save_batch per step."""
    rng = random.Random(seed)
    rows = [ev("training_loop_start", 100.0, source="orchestrator")]
    t = 100.0
    for step in range(rng.randint(4, 9)):
        end = t
        for rank in (0, 1):
            r = t + rng.uniform(0, 0.2)
            for _ in range(rng.randint(1, 4)):
                for op in ("forward", "backward"):
                    d = rng.uniform(0.05, 0.4)
                    rows.append(ev(op, r, r + d, step=step, rank=rank))
                    r += d
            rows.append(ev("optimizer_step", r, r + 0.1, step=step, rank=rank))
            rows.append(ev("weight_broadcast", r + 0.1, r + 0.3, step=step, rank=rank))
            end = max(end, r + 0.3)
        for server in ("s0", 1):
            a = end + rng.uniform(0, 0.2)
            rows.append(ev("weight_sync", a, a + rng.uniform(0, 0.5), source="inference",
                           step=step, server=server))
        rows.append(ev("save_batch", end + 0.5, source="orchestrator", step=step))
        t = end + rng.uniform(0, 1)
    for _ in range(300):
        a = rng.uniform(99.0, t + 1)
        rows.append(ev("generation", a, a + rng.expovariate(1.0), source="inference",
                       server=rng.choice(["s0", 1]), slot=rng.randint(0, 2),
                       status=rng.choice([None, "normal", "discarded", "canceled", "eval"]),
                       tokens=rng.choice([None, rng.randint(1, 300)])))
    for _ in range(60):
        a = rng.uniform(99.0, t + 1)
        rows.append(ev("compute_reward", a, a + rng.choice([0.0, rng.uniform(0, 0.3)]),
                       source="reward", status=rng.choice([None, "canceled", "discarded"])))
    return rows


def assert_same_timings(a: tl.StepTimings, b: tl.StepTimings) -> None:
    assert a.steps.tolist() == b.steps.tolist()
    assert a.keys == b.keys
    np.testing.assert_allclose(a.times, b.times, rtol=1e-12)
    np.testing.assert_allclose(a.values, b.values, rtol=1e-12, atol=1e-9)


def assert_same_buckets(a: tl.Buckets, b: tl.Buckets) -> None:
    assert a.time.tolist() == b.time.tolist() and a.partial.tolist() == b.partial.tolist()
    for name in tl.BUCKET_SERIES:
        np.testing.assert_allclose(a.series[name], b.series[name], rtol=1e-12, atol=1e-9,
                                   err_msg=name)


def run_buckets(t: tl.EventTable, width: float, t0: float, t1: float) -> tl.Buckets:
    return tl.buckets(t, width, t0, t1, lanes=6, servers=2, ranks=2, latest=t0 + 7.0)


@pytest.mark.parametrize("seed", range(5))
def test_row_order_and_batches_change_nothing(seed: int) -> None:
    """Shuffled rows, label lists in another order, the events split into stored batches
    decoded in any order: the same series and buckets."""
    rows = synthetic(seed)
    whole = table(rows)
    want = tl.step_series(whole)
    assert {"timing_forward_total", "timing_generation_canceled_pct",
            "timing_weight_sync_inference_total"} <= set(want.keys)
    rng = random.Random(seed)
    shuffled = rows[:]
    rng.shuffle(shuffled)
    assert_same_timings(tl.step_series(table(shuffled, rng=rng)), want)
    cuts = sorted(rng.sample(range(1, len(rows)), k=rng.randint(1, 12)))
    parts = [table(shuffled[a:b], rng=rng) for a, b in zip([0, *cuts], [*cuts, len(rows)],
                                                           strict=True)]
    rng.shuffle(parts)
    merged = es.concat_events(parts)
    assert_same_timings(tl.step_series(merged), want)
    assert_same_buckets(run_buckets(merged, 1.5, 99.0, 120.0),
                        run_buckets(whole, 1.5, 99.0, 120.0))


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize(("width", "t0", "t1"), [
    (0.5, 101.3, 104.9), (1.0, 101.0, 105.5), (2.5, 103.7, 112.0), (60.0, 100.0, 130.0)])
def test_a_windows_events_give_the_runs_buckets(seed: int, width: float, t0: float,
                                                t1: float) -> None:
    """Buckets from only the events overlapping the whole buckets (`eventstore.window` of the
    aligned range, straddling spans included) equal those from every event of the run."""
    run = table(synthetic(seed))
    first = math.floor(t0 / width) * width
    last = math.ceil(t1 / width) * width
    part = es.window(run, first, last)
    assert part.n < run.n or width == 60.0  # the run starts at 99: something is left out
    assert_same_buckets(run_buckets(part, width, t0, t1), run_buckets(run, width, t0, t1))


# ---------------------------------------------------------------- interval primitives

spans = st.lists(st.tuples(st.integers(0, 3), st.floats(0, 50), st.floats(0, 20)),
                 max_size=40)


@settings(max_examples=150, deadline=None)
@given(spans)
def test_union_is_the_measure_of_each_groups_cover(rows: list[tuple[int, float, float]]) -> None:
    group = np.array([g for g, _, _ in rows], dtype=np.int64)
    start = np.array([s for _, s, _ in rows], dtype=np.float64)
    end = start + np.array([d for _, _, d in rows], dtype=np.float64)
    us, ue = intervals.union(group, start, end)
    assert (ue >= us).all()
    grid = np.linspace(0, 71, 3001)
    covered = sum(((start[group == g, None] <= grid) & (grid < end[group == g, None])).any(0)
                  for g in range(4))
    merged = ((us[:, None] <= grid) & (grid < ue[:, None])).sum(0) if us.size else 0
    assert np.array_equal(np.asarray(covered), np.asarray(merged) + np.zeros_like(grid))


@settings(max_examples=150, deadline=None)
@given(spans, st.sampled_from([0.5, 1.0, 3.0, 7.5]), st.integers(-3, 8), st.integers(0, 12))
def test_overlap_with_buckets_is_the_clipped_sum(rows: list[tuple[int, float, float]],
                                                 width: float, k0: int, nb: int) -> None:
    start = np.array([s for _, s, _ in rows], dtype=np.float64)
    end = start + np.array([d for _, _, d in rows], dtype=np.float64)
    got = intervals.overlap(start, end, k0, nb, width)
    want = [sum(max(0.0, min(e, (k + 1) * width) - max(s, k * width))
                for s, e in zip(start.tolist(), end.tolist(), strict=True))
            for k in range(k0, k0 + nb)]
    np.testing.assert_allclose(got, want, atol=1e-9)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.floats(0, 30), max_size=30),
       st.lists(st.tuples(st.floats(0, 30), st.floats(0, 10)), max_size=8),
       st.booleans())
def test_in_windows_lists_every_window_holding_an_end(ends: list[float],
                                                      wins: list[tuple[float, float]],
                                                      chain: bool) -> None:
    """Chained windows (the fast path) and arbitrary, overlapping ones alike."""
    if chain:
        edges = np.cumsum([0.0, *(w for _, w in wins)])
        a, b = edges[:-1], edges[1:]
        order = np.random.default_rng(len(wins)).permutation(a.size)
        a, b = a[order], b[order]
    else:
        a = np.array([x for x, _ in wins])
        b = a + np.array([w for _, w in wins])
    end = np.array(ends, dtype=np.float64)
    win, row = intervals.in_windows(end, a, b)
    got = sorted(zip(win.tolist(), row.tolist(), strict=True))
    want = sorted((w, r) for w in range(a.size) for r in range(end.size)
                  if a[w] < end[r] <= b[w])
    assert got == want


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(-(2**62), 2**62), max_size=30), st.integers(0, 10**6))
def test_factorize_is_np_unique(values: list[int], shift: int) -> None:
    for x in (np.array(values, dtype=np.int64), np.array([v % 50 + shift for v in values])):
        uniq, inv = intervals.factorize(x)
        want_u, want_inv = np.unique(x, return_inverse=True)
        assert uniq.tolist() == want_u.tolist() and inv.tolist() == want_inv.tolist()


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(-(2**63), 2**63 - 1), max_size=40), st.integers(1, 60))
def test_distinct_is_np_unique(values: list[int], mod: int) -> None:
    for x in (np.array(values, dtype=np.int64), np.array([v % mod for v in values]),
              np.array([v % mod for v in values], dtype=np.int32)):
        got = intervals.distinct(x)
        assert got.dtype == x.dtype and got.tolist() == np.unique(x).tolist()
