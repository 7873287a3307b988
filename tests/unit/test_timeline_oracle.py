"""ingest.core.timeline (step_series, buckets, inference_lanes) against hand-computed cases and
a slow, loop-based oracle (tests/support/timeline_oracle.py) of the same definitions (the
module's docstring, DESIGN "Where the time goes").

Each hand case runs on both sides (`side`: the oracle and the implementation) with the expected
numbers written out here; the randomized runs compare the two sides key for key."""

from __future__ import annotations

import math
import random
from typing import Any

import numpy as np
import pytest

from ingest.core import timeline
from ingest.core.timeline import BUCKET_SERIES, EventTable
from tests.support import timeline_oracle as oracle
from tests.support.timeline_oracle import ev, table

NAN = math.nan
Points = dict[int, tuple[float, dict[str, float]]]


@pytest.fixture(params=["oracle", "impl"])
def side(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def impl_points(st: timeline.StepTimings) -> Points:
    """The implementation's StepTimings as {step: (time, {key: value})}, NaN left out; it holds
    only steps and series that have a point."""
    m, k = st.values.shape
    assert st.steps.dtype == np.int64 and st.times.dtype == np.float64
    assert st.steps.shape == (m,) and st.times.shape == (m,) and len(st.keys) == k
    assert list(st.steps) == sorted(set(st.steps.tolist())), "steps ascending, unique"
    assert st.keys == sorted(set(st.keys)), "keys sorted, unique"
    assert all(key.startswith("timing_") for key in st.keys)
    has = ~np.isnan(st.values)
    assert has.any(axis=1).all(), "a step without a point"
    assert has.any(axis=0).all(), "a series without a point"
    out: Points = {}
    for i, step in enumerate(st.steps.tolist()):
        row = {key: float(st.values[i, j]) for j, key in enumerate(st.keys)
               if not math.isnan(st.values[i, j])}
        if row:
            out[step] = (float(st.times[i]), row)
    return out


def points(side: str, t: EventTable, lanes: int | None = None) -> Points:
    if side == "oracle":
        return oracle.step_series(oracle.decode(t), lanes)
    return impl_points(timeline.step_series(t, lanes))


def lanes_of(side: str, t: EventTable, lanes: int | None = None) -> int:
    if side == "oracle":
        return oracle.inference_lanes(oracle.decode(t), lanes)
    return timeline.inference_lanes(t, lanes)


BucketsOut = tuple[list[float], list[bool], dict[str, list[float]]]


def buckets_of(side: str, t: EventTable, width: float, t0: float, t1: float,
               **counts: Any) -> BucketsOut:
    """(times, partial, {series: values}) with null as NaN, from either side."""
    if side == "oracle":
        times, partial, series = oracle.buckets(oracle.decode(t), width, t0, t1, **counts)
        return times, partial, {k: [NAN if v is None else v for v in vs]
                                for k, vs in series.items()}
    b = timeline.buckets(t, width, t0, t1, **counts)
    assert b.bucket == width
    assert b.time.dtype == np.float64 and b.partial.dtype == np.bool_
    assert sorted(b.series) == sorted(BUCKET_SERIES)
    for name, values in b.series.items():
        assert values.dtype == np.float64 and values.shape == b.time.shape, name
    return (b.time.tolist(), b.partial.tolist(),
            {k: v.tolist() for k, v in b.series.items()})


def assert_points(got: Points, expected: Points) -> None:
    flat_got = {(s, "time"): t for s, (t, _) in got.items()}
    flat_got |= {(s, k): v for s, (_, row) in got.items() for k, v in row.items()}
    flat_exp = {(s, "time"): t for s, (t, _) in expected.items()}
    flat_exp |= {(s, k): v for s, (_, row) in expected.items() for k, v in row.items()}
    assert sorted(flat_got) == sorted(flat_exp), "points that exist"
    assert flat_got == pytest.approx(flat_exp, rel=1e-12, abs=1e-9)


def assert_buckets(got: BucketsOut, times: list[float], partial: list[bool],
                   **series: list[float]) -> None:
    assert sorted(series) == sorted(BUCKET_SERIES)
    assert got[0] == pytest.approx(times, rel=1e-12, abs=1e-9)
    assert got[1] == partial
    flat_got = {(name, k): v for name, vs in got[2].items() for k, v in enumerate(vs)}
    flat_exp = {(name, k): v for name, vs in series.items() for k, v in enumerate(vs)}
    assert sorted(flat_got) == sorted(flat_exp), "series lengths"
    assert flat_got == pytest.approx(flat_exp, rel=1e-12, abs=1e-9, nan_ok=True)


# ---------------------------------------------------------------------------------------------
# Hand-computed cases

ZERO_PCTS = {f"timing_generation_{s}_pct": 0.0 for s in ("normal", "discarded", "canceled", "all")}
ZERO_PCTS |= {f"timing_compute_reward_{s}_pct": 0.0 for s in ("normal", "discarded", "all")}


def test_windows_are_prev_exclusive_cur_inclusive_and_clip(side: str) -> None:
    """Windows (0, 10] and (10, 20]; a generation belongs to the window of its end (one ending
    exactly on a save_batch time to that window), clipped to it; 2 lanes from (server, slot)."""
    t = table([
        ev("training_loop_start", 0.0, source="orchestrator"),
        ev("save_batch", 10.0, source="orchestrator", step=0),
        ev("save_batch", 20.0, source="orchestrator", step=1),
        ev("generation", 5.0, 8.0, source="inference", server="s0", slot=0, status="normal"),
        # straddles 10: only in (10, 20], clipped to 4, unclipped 6
        ev("generation", 8.0, 14.0, source="inference", server="s0", slot=0, status="normal"),
        # ends on 20: in (10, 20], clipped 10, unclipped 11
        ev("generation", 9.0, 20.0, source="inference", server="s0", slot=1, status="discarded"),
        # ends on 10, null status (normal): in (0, 10]
        ev("generation", 6.0, 10.0, source="inference", server="s0", slot=1),
    ])
    assert lanes_of(side, t) == 2
    assert_points(points(side, t), {
        0: (10.0, ZERO_PCTS | {"timing_generation_normal_pct": 35.0,  # 100 · (3 + 4) / 20
                               "timing_generation_all_pct": 35.0, "timing_idle_pct": 65.0,
                               "timing_avg_inference_time": 3.5}),
        1: (20.0, ZERO_PCTS | {"timing_generation_normal_pct": 20.0,  # 100 · 4 / 20
                               "timing_generation_discarded_pct": 50.0,  # 100 · 10 / 20
                               "timing_generation_all_pct": 70.0, "timing_idle_pct": 30.0,
                               "timing_avg_inference_time": 8.5}),  # (6 + 11) / 2
    })


def statuses_run() -> EventTable:
    """One window (0, 10] with every status of generation and compute_reward."""
    gen = {"source": "inference", "server": "s0"}
    rew = {"source": "reward"}
    return table([
        ev("training_loop_start", 0.0, source="orchestrator"),
        ev("save_batch", 10.0, source="orchestrator", step=0),
        ev("generation", 0.0, 5.0, slot=0, status="normal", tokens=100, **gen),
        ev("generation", 2.0, 4.0, slot=1, status="canceled", tokens=1000, **gen),
        ev("generation", 1.0, 9.0, slot=2, status="canceled", **gen),
        ev("generation", 3.0, 6.0, slot=3, status="discarded", tokens=50, **gen),
        ev("generation", 4.0, 10.0, slot=4, status="eval", tokens=30, **gen),
        ev("generation", 5.0, 6.0, slot=5, **gen),  # null status and tokens
        ev("compute_reward", 1.0, 3.0, status="normal", **rew),
        ev("compute_reward", 2.0, 6.0, status="canceled", **rew),
        ev("compute_reward", 3.0, 4.0, status="eval", **rew),
        ev("compute_reward", 0.0, 2.0, status="discarded", **rew),
        ev("compute_reward", 8.0, 8.0, **rew),  # null status, duration 0
    ])


def test_statuses_in_the_window_series(side: str) -> None:
    """lanes = 4 given: denominators 10 · 4. Canceled generations count in canceled and all,
    not in the mean; eval only in all; canceled compute_reward nowhere; zero durations not in
    the compute_reward mean."""
    assert_points(points(side, statuses_run(), lanes=4), {0: (10.0, {
        "timing_generation_normal_pct": 15.0,  # 5 + 1
        "timing_generation_discarded_pct": 7.5,  # 3
        "timing_generation_canceled_pct": 25.0,  # 2 + 8
        "timing_generation_all_pct": 62.5,  # 6 + 3 + 10 + 6
        "timing_compute_reward_normal_pct": 5.0,  # 2 + 0
        "timing_compute_reward_discarded_pct": 5.0,  # 2
        "timing_compute_reward_all_pct": 12.5,  # 2 + 0 + 2 + 1
        "timing_idle_pct": 25.0,
        "timing_avg_inference_time": 3.75,  # (5 + 3 + 6 + 1) / 4
        "timing_avg_compute_reward_time": 5 / 3,  # (2 + 1 + 2) / 3
    })})


def test_statuses_in_buckets_and_the_edge(side: str) -> None:
    """Buckets [0, 10) and [10, 20): the eval generation ends on 10, so in the later bucket;
    canceled ones count in generations_canceled and in utilization; null tokens count 0."""
    got = buckets_of(side, statuses_run(), 10.0, 0.0, 20.0, lanes=4, servers=1, ranks=0,
                     latest=10.0)
    assert_buckets(got, [0.0, 10.0], [False, True],
                   generations=[3, 1], generations_canceled=[2, 0],
                   tokens_per_second=[15.0, 3.0],  # (100 + 50) / 10, 30 / 10
                   inference_utilization_pct=[62.5, 0.0],  # 100 · 25 / 40
                   weight_sync_pct=[0.0, 0.0],
                   trainer_working_pct=[NAN, NAN], trainer_idle_pct=[NAN, NAN])


def straggler_run() -> EventTable:
    """Step 2 on rank 0; step 4 a save_batch only (no trainer events, no window); step 5 on two
    ranks, rank 1 the slower, `train_step` with `train_step/forward` and `/backward` inside."""
    return table([
        ev("train_step", 0.0, 1.0, step=2, rank=0),
        ev("save_batch", 1.5, source="orchestrator", step=4),
        ev("train_step", 2.0, 6.0, step=5, rank=0),
        ev("train_step/forward", 2.0, 3.0, step=5, rank=0),
        ev("train_step/forward", 3.0, 4.0, step=5, rank=0),
        ev("train_step/backward", 4.0, 5.5, step=5, rank=0),
        ev("train_step", 2.0, 8.0, step=5, rank=1),
        ev("train_step/forward", 2.0, 3.5, step=5, rank=1),
        ev("train_step/forward", 3.5, 5.0, step=5, rank=1),
        ev("train_step/forward", 5.0, 6.0, step=5, rank=1),
        # a nested name with no parent, no step: not trainer work in buckets, not in a step
        ev("data/prefetch", 8.0, 9.0, rank=1),
        # not a trainer event (source inference): in no step, not trainer work
        ev("train_step", 0.0, 20.0, source="inference", step=5, server="x"),
    ], extra_names=("optimizer_step",))


def test_straggler_nested_and_gap(side: str) -> None:
    """Totals are the slowest rank's sum; means over all ranks' spans; step 5's previous step
    is 2 (step 4 has no trainer events); step 2 has no previous step and no loop start."""
    assert_points(points(side, straggler_run()), {
        2: (1.0, {"timing_step_active": 1.0, "timing_train_step_total": 1.0,
                  "timing_train_step_microbatch_mean": 1.0}),
        5: (8.0, {"timing_step_active": 6.0,  # 8 − 2
                  "timing_step_total": 7.0,  # 8 − 1
                  "timing_waiting_for_data": 1.0,  # 2 − 1
                  "timing_train_step_total": 6.0,  # max(4, 6)
                  "timing_train_step_microbatch_mean": 5.0,
                  "timing_train_step/forward_total": 4.0,  # max(1 + 1, 1.5 + 1.5 + 1)
                  "timing_train_step/forward_microbatch_mean": 1.2,  # 6 / 5
                  "timing_train_step/backward_total": 1.5,
                  "timing_train_step/backward_microbatch_mean": 1.5,
                  "timing_microbatch_count": 3.0,
                  # top-level spans only: train_step 4 on rank 0, 6 on rank 1; median 5
                  "timing_rank_spread": 1.2, "timing_slowest_rank": 1.0}),
    })


RANK_KEYS = ("timing_rank_spread", "timing_slowest_rank")


def rank_points(p: Points) -> Points:
    """Only the rank series of `p` (steps without one left out)."""
    out: Points = {}
    for s, (t, row) in p.items():
        kept = {k: v for k, v in row.items() if k in RANK_KEYS}
        if kept:
            out[s] = (t, kept)
    return out


def test_rank_spread_and_slowest_rank(side: str) -> None:
    """Per rank the sum of its top-level spans in the step, a null rank left out; max over
    median; the smallest rank on ties; no point with one rank or a median of 0."""
    t = table([
        # step 0: ranks sum 2, 3, 6 (nested `forward/x` and the null rank's 100 s do not count)
        ev("forward", 0.0, 1.0, step=0, rank=0), ev("backward", 1.0, 2.0, step=0, rank=0),
        ev("forward/x", 0.0, 5.0, step=0, rank=0),
        ev("forward", 0.0, 1.5, step=0, rank=1), ev("forward", 1.5, 3.0, step=0, rank=1),
        ev("forward", 0.0, 6.0, step=0, rank=2), ev("forward", 0.0, 100.0, step=0),
        ev("marker", 7.0, step=0, rank=3),  # an instant: rank 3 has no span in step 0
        ev("forward", 0.0, 50.0, step=0, rank=4, source="inference"),  # not a trainer event
        # step 1: ranks 0 and 2 tie at 4 s, rank 1 has 2 s: median 4
        ev("optimizer_step", 110.0, 114.0, step=1, rank=2),
        ev("optimizer_step", 110.0, 112.0, step=1, rank=1),
        ev("optimizer_step", 110.0, 111.0, step=1, rank=0),
        ev("optimizer_step", 111.0, 114.0, step=1, rank=0),
        # step 2: one rank beside the null one: no point
        ev("forward", 120.0, 121.0, step=2, rank=0), ev("forward", 120.0, 125.0, step=2),
        # step 3: sums 0, 0, 1: the median is 0, no point
        ev("forward", 130.0, 130.0, step=3, rank=0), ev("forward", 130.0, 130.0, step=3, rank=1),
        ev("forward", 130.0, 131.0, step=3, rank=2),
        # step 4: four ranks, 1, 2, 3, 10 s: median 2.5, spread 4, rank 7 the slowest
        *(ev("forward", 140.0, 140.0 + d, step=4, rank=r)
          for r, d in ((5, 1.0), (6, 2.0), (0, 3.0), (7, 10.0))),
    ])
    assert_points(rank_points(points(side, t)), {
        0: (100.0, {"timing_rank_spread": 2.0, "timing_slowest_rank": 2.0}),  # 6 / 3
        1: (114.0, {"timing_rank_spread": 1.0, "timing_slowest_rank": 0.0}),
        4: (150.0, {"timing_rank_spread": 4.0, "timing_slowest_rank": 7.0}),
    })


def test_trainer_working_counts_top_level_spans_per_rank(side: str) -> None:
    """Buckets of 2 s over two ranks: only names without `/`, of source trainer."""
    got = buckets_of(side, straggler_run(), 2.0, 0.0, 10.0, lanes=0, servers=0, ranks=2,
                     latest=9.0)
    assert_buckets(got, [0.0, 2.0, 4.0, 6.0, 8.0], [False] * 4 + [True],
                   generations=[0] * 5, generations_canceled=[0] * 5,
                   tokens_per_second=[0.0] * 5, inference_utilization_pct=[NAN] * 5,
                   weight_sync_pct=[NAN] * 5,
                   trainer_working_pct=[25.0, 100.0, 100.0, 50.0, 0.0],
                   trainer_idle_pct=[75.0, 0.0, 0.0, 50.0, 100.0])


@pytest.mark.parametrize(("loop_starts", "more"), [
    ([], {}),
    ([(0.5, "orchestrator"), (0.25, "orchestrator")],  # the earliest
     {"timing_step_total": 2.75, "timing_waiting_for_data": 0.75}),
    ([(1.5, "trainer")], {"timing_step_total": 1.5, "timing_waiting_for_data": 0.0}),  # ≥ 0
])
def test_first_step_and_training_loop_start(side: str, loop_starts: list[tuple[float, str]],
                                            more: dict[str, float]) -> None:
    t = table([ev("forward", 1.0, 3.0, step=0)]
              + [ev("training_loop_start", at, source=src) for at, src in loop_starts])
    assert_points(points(side, t), {0: (3.0, {
        "timing_step_active": 2.0, "timing_forward_total": 2.0,
        "timing_forward_microbatch_mean": 2.0, "timing_microbatch_count": 1.0} | more)})


def test_ops_named_like_a_derived_total(side: str) -> None:
    """Ops `step`, `weight_sync_trainer`, `weight_sync_inference` keep their mean but give no
    _total: timing_step_total is end_0 − loop start, the trainer total is weight_broadcast's."""
    t = table([
        ev("training_loop_start", -1.0, source="orchestrator"),
        ev("step", 0.0, 1.0, step=0, rank=0),
        ev("weight_sync_trainer", 1.0, 3.0, step=0, rank=0),
        ev("weight_broadcast", 3.0, 4.0, step=0, rank=0),
        ev("weight_sync_inference", 4.0, 4.5, step=0, rank=0),
    ])
    assert_points(points(side, t), {0: (4.5, {
        "timing_step_active": 4.5, "timing_step_total": 5.5, "timing_waiting_for_data": 1.0,
        "timing_step_microbatch_mean": 1.0, "timing_weight_sync_trainer_microbatch_mean": 2.0,
        "timing_weight_broadcast_total": 1.0, "timing_weight_broadcast_microbatch_mean": 1.0,
        "timing_weight_sync_trainer_total": 1.0,
        "timing_weight_sync_inference_microbatch_mean": 0.5})})


def weight_sync_run() -> EventTable:
    inf = {"source": "inference"}
    return table([
        ev("weight_broadcast", 10.0, 11.0, step=1, rank=0),
        ev("weight_broadcast", 11.5, 12.0, step=1, rank=0),
        ev("weight_broadcast", 10.0, 12.0, step=1, rank=1),
        ev("weight_sync", 11.0, 13.0, step=1, server="a", **inf),
        ev("weight_sync", 12.0, 14.0, step=1, server="a", **inf),  # overlaps the one above
        ev("weight_sync", 10.5, 12.0, step=1, server="b", **inf),
        ev("weight_sync", 20.0, 21.0, step=2, server="a", **inf),
        ev("weight_sync", 20.5, 22.0, step=2, server="b", **inf),
    ])


def test_weight_sync_series(side: str) -> None:
    """Trainer side = the weight_broadcast total; inference side = max end − min start over
    servers; step 2 has only inference syncs: its time is their latest end."""
    assert_points(points(side, weight_sync_run()), {
        1: (12.0, {"timing_step_active": 2.0, "timing_weight_broadcast_total": 2.0,
                   "timing_weight_broadcast_microbatch_mean": 3.5 / 3,
                   "timing_weight_sync_trainer_total": 2.0,
                   "timing_weight_sync_inference_total": 3.5,  # 14 − 10.5
                   "timing_rank_spread": 2.0 / 1.75,  # ranks 1.5 and 2: median 1.75
                   "timing_slowest_rank": 1.0}),
        2: (22.0, {"timing_weight_sync_inference_total": 2.0}),  # 22 − 20
    })


def test_weight_sync_buckets_union_per_server(side: str) -> None:
    """Buckets of 4 s from floor(9 / 4) = 2 while k · 4 < 21; server a's two overlapping syncs
    count once ([12, 16): 2 s, not 3); the bucket holding 22 is partial."""
    got = buckets_of(side, weight_sync_run(), 4.0, 9.0, 21.0, lanes=0, servers=2, ranks=2,
                     latest=22.0)
    assert_buckets(got, [8.0, 12.0, 16.0, 20.0], [False, False, False, True],
                   generations=[0] * 4, generations_canceled=[0] * 4,
                   tokens_per_second=[0.0] * 4, inference_utilization_pct=[NAN] * 4,
                   weight_sync_pct=[31.25, 25.0, 0.0, 31.25],  # (1 + 1.5) / 2 / 4, 2 / 2 / 4
                   trainer_working_pct=[43.75, 0.0, 0.0, 0.0],  # (1.5 + 2) / 2 / 4
                   trainer_idle_pct=[56.25, 100.0, 100.0, 100.0])


def lanes_run(generations: bool) -> EventTable:
    """Window (0, 10]: five 2 s generations on (a, 0) twice, (a, 1), (0, 0), (null, null);
    a 1 s compute_reward; spans on other pairs that are not generations, a generation instant."""
    rows = [
        ev("training_loop_start", 0.0, source="orchestrator"),
        ev("save_batch", 10.0, source="orchestrator", step=0),
        ev("weight_sync", 0.0, 1.0, source="inference", server="c", slot=5),
        ev("compute_reward", 2.0, 3.0, source="reward", server="d", slot=0),
        ev("generation", 4.0, source="inference", server="e", slot=0),  # an instant
    ]
    if generations:
        rows += [ev("generation", a, a + 2, source="inference", server=srv, slot=slot,
                    status="normal")
                 for a, srv, slot in ((1, "a", 0), (2, "a", 1), (3, 0, 0), (5, "a", 0),
                                      (6, None, None))]
    return table(rows)


@pytest.mark.parametrize(("lanes", "n_lanes", "gen_pct", "reward_pct"), [
    (None, 4, 25.0, 2.5),  # 100 · 10 / (10 · 4), 100 · 1 / 40
    (8, 8, 12.5, 1.25),
    (0, 0, None, None),
])
def test_lanes_given_or_from_generation_pairs(side: str, lanes: int | None, n_lanes: int,
                                              gen_pct: float | None,
                                              reward_pct: float | None) -> None:
    t = lanes_run(generations=True)
    assert lanes_of(side, t, lanes) == n_lanes
    expected = {"timing_avg_inference_time": 2.0, "timing_avg_compute_reward_time": 1.0}
    if gen_pct is not None and reward_pct is not None:
        expected |= ZERO_PCTS | {
            "timing_generation_normal_pct": gen_pct, "timing_generation_all_pct": gen_pct,
            "timing_compute_reward_normal_pct": reward_pct,
            "timing_compute_reward_all_pct": reward_pct,
            "timing_idle_pct": 100 - gen_pct - reward_pct}
    assert_points(points(side, t, lanes), {0: (10.0, expected)})


def test_no_generation_spans_means_zero_lanes(side: str) -> None:
    """Lanes from pairs: none (an instant is not a span), so no pct points; the compute_reward
    mean stays, the generation mean has no point."""
    t = lanes_run(generations=False)
    assert lanes_of(side, t) == 0
    assert_points(points(side, t), {0: (10.0, {"timing_avg_compute_reward_time": 1.0})})


def instants_run() -> EventTable:
    return table([
        ev("training_loop_start", 0.0, source="orchestrator"),
        ev("forward", 0.5, step=0, rank=0),  # an instant: marks start_0, not a forward span
        ev("forward", 1.0, 2.0, step=0, rank=0),
        ev("marker", 3.0, step=0, rank=0),  # an instant: marks end_0, no series of its own
        ev("save_batch", 4.0, source="orchestrator", step=0),
        ev("save_batch", 8.0, 9.0, source="orchestrator", step=1),  # a span: its start
        ev("save_batch", 8.5, source="orchestrator", step=1),  # later: not step 1's
        ev("generation", 3.0, 6.0, source="inference", server="a", slot=0, status="normal"),
        ev("generation", 7.0, source="inference", server="a", slot=1),  # an instant
    ])


def test_instants_in_step_series(side: str) -> None:
    """Instants bound a step but have no duration; the earliest save_batch, a span's start,
    ends window 1 = (4, 8]; the generation instant counts nowhere (1 lane)."""
    assert_points(points(side, instants_run()), {
        0: (3.0, ZERO_PCTS | {"timing_step_active": 2.5, "timing_step_total": 3.0,
                              "timing_waiting_for_data": 0.5, "timing_forward_total": 1.0,
                              "timing_forward_microbatch_mean": 1.0,
                              "timing_microbatch_count": 1.0, "timing_idle_pct": 100.0}),
        1: (8.0, ZERO_PCTS | {"timing_generation_normal_pct": 50.0,  # 100 · 2 / (4 · 1)
                              "timing_generation_all_pct": 50.0, "timing_idle_pct": 50.0,
                              "timing_avg_inference_time": 3.0}),
    })


def test_instants_in_buckets(side: str) -> None:
    got = buckets_of(side, instants_run(), 5.0, 0.0, 10.0, lanes=1, servers=1, ranks=1,
                     latest=9.0)
    assert_buckets(got, [0.0, 5.0], [False, True],
                   generations=[0, 1], generations_canceled=[0, 0],
                   tokens_per_second=[0.0, 0.0],
                   inference_utilization_pct=[40.0, 20.0],  # 100 · 2 / 5, 100 · 1 / 5
                   weight_sync_pct=[0.0, 0.0],
                   trainer_working_pct=[20.0, 0.0], trainer_idle_pct=[80.0, 100.0])


def test_no_latest_no_partial_bucket(side: str) -> None:
    got = buckets_of(side, instants_run(), 5.0, 0.0, 10.0, lanes=1, servers=1, ranks=1,
                     latest=None)
    assert got[1] == [False, False]


# ---------------------------------------------------------------------------------------------
# Randomized runs: implementation vs oracle

OPS = ("optimizer_step", "forward", "weight_broadcast", "data/load", "train_step/loss", "step",
       "weight_sync_trainer")


def trainer_step(rng: random.Random, rows: list[dict[str, Any]], step: int, t: float,
                 ranks: list[int | None]) -> float:
    """One step's trainer spans on every rank from about t; returns the step's latest end."""
    end = t
    for rank in ranks:
        r = t + rng.uniform(0, 0.3)
        outer = r
        for _ in range(rng.randint(1, 4)):
            for name in ("train_step/forward", "train_step/backward"):
                d = rng.uniform(0.05, 0.5)
                rows.append(ev(name, r, r + d, step=step, rank=rank))
                r += d
        rows.append(ev("train_step", outer, r, step=step, rank=rank))
        for op in rng.sample(OPS, k=rng.randint(0, 3)):
            for _ in range(rng.randint(1, 2)):
                d = rng.uniform(0.0, 0.4)
                rows.append(ev(op, r, r + d, step=step, rank=rank))
                r += d * rng.choice([0.5, 1.0])  # some overlap
        if rng.random() < 0.2:
            rows.append(ev("checkpoint", r + 0.1, step=step, rank=rank))  # an instant
            r += 0.1
        end = max(end, r)
    return end


def random_run(seed: int) -> tuple[list[dict[str, Any]], random.Random]:
    """A few hundred events: ranks, steps with gaps, nested names, servers and slots, every
    status and null, null tokens, save_batch per step (not always), loop start sometimes."""
    rng = random.Random(seed)
    base = rng.choice([0.0, 1.7e9 + rng.random()])
    ranks = rng.choice([[None], [0], [0, 1], [0, 1, 2], [None, 0, 1]])
    servers = rng.sample(["a", "b", 0, 7], k=rng.randint(1, 3)) + [None] * rng.randint(0, 1)
    rows: list[dict[str, Any]] = []
    t = base + rng.uniform(0, 3)
    if rng.random() < 0.7:
        rows.append(ev("training_loop_start", t, source=rng.choice(["trainer", "orchestrator"])))
        if rng.random() < 0.3:
            rows.append(ev("training_loop_start", t + rng.uniform(-1, 5), source="orchestrator"))
    last_save = -math.inf
    steps = sorted(rng.sample(range(25), k=rng.randint(6, 12)))
    for step in steps:
        t += rng.uniform(0, 2)
        end = trainer_step(rng, rows, step, t, ranks) if rng.random() < 0.9 else t
        if rng.random() < 0.6:
            for server in servers:
                for _ in range(rng.randint(1, 2)):
                    a = end + rng.uniform(-0.5, 0.5)
                    rows.append(ev("weight_sync", a, a + rng.uniform(0, 1), source="inference",
                                   step=step, server=server))
        if rng.random() < 0.85:
            s = max(end + rng.uniform(0.01, 0.5), last_save + 0.01)
            last_save = s
            src = rng.choice(["orchestrator", "orchestrator", "trainer"])
            rows.append(ev("save_batch", s, s + rng.choice([0.0, 0.2]) if rng.random() < 0.3
                           else None, source=src, step=step))
            if rng.random() < 0.2:
                rows.append(ev("save_batch", s + rng.uniform(0, 1), source=src, step=step))
        t = end
    statuses = [None, "normal", "normal", "discarded", "canceled", "eval"]
    for _ in range(rng.randint(80, 200)):
        a = rng.uniform(base, t + 2)
        rows.append(ev("generation", a, a + rng.expovariate(1 / 1.5), source="inference",
                       server=rng.choice(servers), slot=rng.choice([0, 1, 2, None]),
                       status=rng.choice(statuses),
                       tokens=rng.choice([None, rng.randint(0, 500)]),
                       step=rng.choice([None, *steps])))
    for _ in range(rng.randint(10, 60)):
        a = rng.uniform(base, t + 2)
        rows.append(ev("compute_reward", a, a + rng.choice([0.0, rng.uniform(0, 1)]),
                       source="reward", status=rng.choice(statuses),
                       step=rng.choice([None, *steps])))
    for _ in range(rng.randint(0, 10)):  # trainer spans outside any step
        a = rng.uniform(base, t)
        rows.append(ev(rng.choice(["data/prefetch", "eval_loop"]), a, a + rng.uniform(0, 2),
                       rank=rng.choice(ranks)))
    on_edges(rng, rows, base, t)
    rng.shuffle(rows)
    return rows, rng


def on_edges(rng: random.Random, rows: list[dict[str, Any]], base: float, t: float) -> None:
    """Generations ending or starting exactly on a save_batch time or on a multiple of 60 s
    (an edge of every bucket width used); sometimes a loop start after the first steps."""
    saves = [r["start"] for r in rows if r["name"] == "save_batch"]
    edges = [60 * math.ceil(x / 60) for x in (rng.uniform(base, t) for _ in range(4))]
    for at in rng.sample(saves, k=min(len(saves), 4)) + edges:
        d = rng.uniform(0.1, 2)
        a, b = (at - d, at) if rng.random() < 0.5 else (at, at + d)
        rows.append(ev("generation", a, b, source="inference", server=None, slot=9,
                       status=rng.choice(["normal", "canceled"]), tokens=7))
    if rng.random() < 0.15:
        rows.append(ev("training_loop_start", rng.uniform(base, t), source="orchestrator"))


SEEDS = list(range(12))


def run_counts(events: list[oracle.Event]) -> tuple[int, int]:
    """(servers, ranks) as the read API passes them: distinct servers of generation and
    weight_sync spans, distinct ranks of trainer spans (null one of each)."""
    servers = {e.server for e in events if e.span and e.name in ("generation", "weight_sync")}
    ranks = {e.rank for e in events if e.span and e.source == "trainer"}
    return len(servers), len(ranks)


def test_random_runs_have_every_kind_of_point() -> None:
    """The generator reaches every series and case the comparison is meant to cover."""
    keys: set[str] = set()
    for seed in SEEDS:
        rows, _ = random_run(seed)
        for _, row in oracle.step_series(oracle.decode(table(rows))).values():
            keys |= set(row)
    for key in ("timing_step_total", "timing_waiting_for_data", "timing_microbatch_count",
                "timing_train_step/forward_total", "timing_weight_sync_trainer_total",
                "timing_weight_sync_inference_total", "timing_generation_canceled_pct",
                "timing_avg_compute_reward_time", "timing_idle_pct", "timing_step_microbatch_mean",
                "timing_rank_spread", "timing_slowest_rank"):
        assert key in keys, key


@pytest.mark.parametrize("seed", SEEDS)
def test_step_series_matches_oracle(seed: int) -> None:
    rows, rng = random_run(seed)
    t = table(rows, rng=rng, extra_names=("unused_op",))
    lanes = rng.choice([None, None, 0, 3])
    want = oracle.step_series(oracle.decode(t), lanes)
    got = impl_points(timeline.step_series(t, lanes))
    steps = sorted(set(want) | set(got))
    keys = sorted({k for _, row in want.values() for k in row}
                  | {k for _, row in got.values() for k in row})
    assert sorted(got) == sorted(want), "steps with points"

    def matrix(p: Points) -> np.ndarray:
        return np.array([[p[s][1].get(k, NAN) if s in p else NAN for k in keys]
                         for s in steps], dtype=np.float64).reshape(len(steps), len(keys))

    g, w = matrix(got), matrix(want)
    for j, key in enumerate(keys):
        differ = [steps[i] for i in range(len(steps)) if np.isnan(g[i, j]) != np.isnan(w[i, j])]
        assert not differ, f"{key}: point exists on one side only at steps {differ}"
        np.testing.assert_allclose(g[:, j], w[:, j], rtol=1e-12, atol=1e-9, err_msg=key)
    np.testing.assert_allclose([got[s][0] for s in steps], [want[s][0] for s in steps],
                               rtol=1e-12, atol=1e-9, err_msg="point times")


@pytest.mark.parametrize("seed", SEEDS)
def test_inference_lanes_matches_oracle(seed: int) -> None:
    rows, rng = random_run(seed)
    t = table(rows, rng=rng)
    for lanes in (None, 0, 5):
        assert timeline.inference_lanes(t, lanes) == oracle.inference_lanes(oracle.decode(t),
                                                                            lanes)


def overlapping(rows: list[dict[str, Any]], width: float, t0: float,
                t1: float) -> list[dict[str, Any]]:
    """The events overlapping the whole buckets of [t0, t1), as the read API selects them."""
    lo, hi = math.floor(t0 / width) * width, math.ceil(t1 / width) * width
    return [r for r in rows if r["start"] < hi
            and (r["start"] if r["end"] is None else r["end"]) >= lo]


@pytest.mark.parametrize("seed", SEEDS)
def test_buckets_match_oracle(seed: int) -> None:
    rows, rng = random_run(seed)
    run = oracle.decode(table(rows))
    servers, ranks = run_counts(run)
    lanes = oracle.inference_lanes(run, rng.choice([None, None, 0, 4]))
    latest = max(e.last for e in run)
    first = min(e.start for e in run)
    for _ in range(3):
        width = rng.choice([1.0, 2.5, 10.0, 60.0])
        t0 = first + rng.uniform(-3, (latest - first) / 2)
        t1 = t0 + rng.uniform(width / 3, latest - first + 5)
        for part in (rows, overlapping(rows, width, t0, t1)):
            t = table(part, rng=rng)
            counts = {"lanes": lanes, "servers": servers, "ranks": ranks, "latest": latest}
            want = buckets_of("oracle", t, width, t0, t1, **counts)
            got = buckets_of("impl", t, width, t0, t1, **counts)
            where = f"B={width} [{t0}, {t1})"
            np.testing.assert_allclose(got[0], want[0], rtol=1e-12, atol=1e-9, err_msg=where)
            assert got[1] == want[1], f"partial {where}"
            for name in BUCKET_SERIES:
                g, w = np.array(got[2][name]), np.array(want[2][name])
                assert (np.isnan(g) == np.isnan(w)).all(), f"{name} null pattern {where}"
                np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-9,
                                           err_msg=f"{name} {where}")
