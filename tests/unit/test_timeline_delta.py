"""ingest.core.timeline_delta: recomputing only the steps new events touch gives, step for
step, what recomputing the whole run gives — for random runs whose events arrive in random
order and pieces, the loop start, save_batches, late generations and weight syncs included."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from ingest.core import eventstore, timeline
from ingest.core.intervals import label_mask
from ingest.core.timeline_delta import RowIndex, _Zones, affected
from tests.support.timeline_oracle import ev, table
from tests.unit.test_timeline_oracle import Points, assert_points, impl_points, random_run


def rising_saves(rows: list[dict[str, Any]]) -> None:
    """Give one save_batch instant per step, their times (the run's own) rising with the
    step."""
    saves = [r for r in rows if r["name"] == "save_batch"]
    seen: set[int] = set()
    for r in sorted(saves, key=lambda r: (r["step"], r["start"])):
        if r["step"] in seen:
            rows.remove(r)
        seen.add(r["step"])
    kept = sorted((r for r in rows if r["name"] == "save_batch"), key=lambda r: r["step"])
    for r, t in zip(kept, sorted(r["start"] for r in kept), strict=True):
        r["start"], r["end"] = t, None


def incremental(before: Points, all_events: timeline.EventTable, new: int
                ) -> tuple[Points, bool]:
    """The series after rows from `new` on arrived, from `before` (the series of the rows
    before) and only what `affected` says to recompute; and whether it was incremental."""
    lanes = timeline.inference_lanes(all_events)
    previous = eventstore.take(all_events, np.arange(new))
    found = affected(all_events, new)
    if found is None or timeline.inference_lanes(previous) != lanes:
        return impl_points(timeline.step_series(all_events)), False
    steps, rows = found
    part = impl_points(timeline.step_series(eventstore.take(all_events, rows), lanes))
    touched = set(steps.tolist())
    out = {s: p for s, p in before.items() if s not in touched}
    out.update({s: p for s, p in part.items() if s in touched})
    return dict(sorted(out.items())), True


@pytest.mark.parametrize("seed", range(40))
def test_touched_steps_recomputed_alone_equal_the_whole(seed: int) -> None:
    rows, rng = random_run(seed)
    if rng.random() < 0.7:  # save_batch times rising with the step (else: all recomputed)
        rising_saves(rows)
    cuts = sorted(rng.sample(range(1, len(rows)), k=4)) + [len(rows)]
    got: Points = {}
    done = 0
    for cut in cuts:
        now = table(rows[:cut])
        got, _ = incremental(got, now, done) if done else (
            impl_points(timeline.step_series(now)), False)
        assert_points(got, impl_points(timeline.step_series(now)))
        done = cut


def test_most_random_arrivals_are_incremental() -> None:
    """The property above is not met by recomputing everything every time."""
    counted = 0
    for seed in range(40):
        rows, rng = random_run(seed)
        rows = [r for r in rows if r["name"] != "training_loop_start"]
        rising_saves(rows)
        cut = len(rows) * 3 // 4
        _, was = incremental(impl_points(timeline.step_series(table(rows[:cut]))),
                             table(rows), cut)
        counted += was
    assert counted >= 20


def test_a_late_generation_touches_only_its_window() -> None:
    rows = [ev("training_loop_start", 0.0)]
    for step in range(1, 6):
        rows.append(ev("forward", step * 10.0, step * 10.0 + 4, step=step, rank=0))
        rows.append(ev("save_batch", step * 10.0 - 1, step=step, source="orchestrator"))
        rows.append(ev("generation", step * 10.0 - 8, step * 10.0 - 2, source="inference",
                       server=0, slot=0))
    late = ev("generation", 21.0, 28.0, source="inference", server=0, slot=0)  # window (19, 29]
    found = affected(table([*rows, late]), len(rows))
    assert found is not None and found[0].tolist() == [3]
    # A new trainer step touches it and the next one (end_prev); a loop start everything.
    again = affected(table([*rows, ev("backward", 30.0, 31.0, step=3, rank=0)]), len(rows))
    assert again is not None and again[0].tolist() == [3, 4]
    assert affected(table([*rows, ev("training_loop_start", 0.5)]), len(rows)) is None


def test_save_batches_out_of_order_recompute_everything() -> None:
    rows = [ev("save_batch", 5.0, step=1), ev("save_batch", 3.0, step=2)]
    assert affected(table([*rows, ev("forward", 1.0, 2.0, step=1)]), 2) is None


def scan(ev: timeline.EventTable, new: int) -> tuple[np.ndarray, np.ndarray] | None:
    """`affected` as it was before the RowIndex (one mask over every row per kind, the needed
    rows as one mask): the reference the indexed version must equal, row for row."""
    n = ev.n
    fresh = np.zeros(n, dtype=bool)
    fresh[new:] = True
    span = ~np.isnan(ev.end)
    stepped = ev.step >= 0

    def named(name: str) -> np.ndarray:
        return label_mask(ev.names, ev.name, name)

    tls = named("training_loop_start") & ~span
    if (tls & fresh).any():
        return None
    trainer = label_mask(ev.sources, ev.source, "trainer") & stepped
    save = named("save_batch") & stepped
    ends = (named("generation") | named("compute_reward")) & span
    sync = named("weight_sync") & span & stepped
    train_steps = np.unique(ev.step[trainer])
    touched = [np.unique(ev.step[trainer & fresh])]
    touched.append(after(train_steps, touched[0]))
    rows = np.flatnonzero(save)
    order = rows[np.lexsort((ev.start[rows], ev.step[rows]))]
    firsts = np.ones(order.size, dtype=bool)
    firsts[1:] = ev.step[order][1:] != ev.step[order][:-1]
    save_steps, save_times = ev.step[order][firsts], ev.start[order][firsts]
    if save_times.size > 1 and np.any(np.diff(save_times) <= 0):
        return None
    new_saves = np.unique(ev.step[save & fresh])
    touched += [new_saves, after(save_steps, new_saves)]
    window = np.searchsorted(save_times, ev.end[new:][ends[new:]], side="left")
    touched.append(np.unique(save_steps[window[window < save_times.size]]))
    touched.append(np.unique(ev.step[sync & fresh]))
    steps = np.unique(np.concatenate(touched)).astype(np.int64)
    at = np.searchsorted(train_steps, steps, side="left")
    prev = train_steps[at[at > 0] - 1]
    need = (trainer & np.isin(ev.step, np.concatenate([steps, prev]))) | tls | save
    need |= sync & np.isin(ev.step, steps)
    window = np.searchsorted(save_times, ev.end, side="left")
    inside = ends & (window < save_times.size)
    need[inside] |= np.isin(save_steps[window[inside]], steps)
    return steps, np.flatnonzero(need)


def after(steps: np.ndarray, of: np.ndarray) -> np.ndarray:
    idx = np.searchsorted(steps, of, side="right")
    return steps[idx[idx < steps.size]]


@pytest.mark.parametrize("block", [1, 7, 64, RowIndex.BLOCK])
@pytest.mark.parametrize("seed", range(40))
def test_the_index_kept_across_appends_finds_what_a_scan_finds(seed: int, block: int) -> None:
    """The RowIndex, fed the run's rows piece by piece as the pipeline's cache grows (pieces
    of random sizes, `new` at any earlier row; blocks of rows from 1 to a whole run, partial
    blocks completed by later pieces), gives the same steps and the same rows as a scan of
    every row: the recomputed series are the same numbers, bit for bit."""
    rows, rng = random_run(seed)
    if rng.random() < 0.7:
        rising_saves(rows)
    index = RowIndex(block)
    cuts = sorted(rng.sample(range(1, len(rows)), k=6)) + [len(rows)]
    compared = 0
    for cut in cuts:
        now = table(rows[:cut])
        index.add(now)
        for new in {cut - 1, rng.randrange(0, cut), index_cut(cuts, cut)}:
            want, got = scan(now, new), affected(now, new, index)
            assert (want is None) == (got is None)
            if want is not None and got is not None:
                assert got[0].tolist() == want[0].tolist()
                assert got[1].tolist() == want[1].tolist()
                compared += 1
    assert compared


def index_cut(cuts: list[int], cut: int) -> int:
    """The previous cut (where the last pass ended), or 0."""
    earlier = [c for c in cuts if c < cut]
    return earlier[-1] if earlier else 0


def test_an_index_of_other_rows_is_refused() -> None:
    index = RowIndex()
    index.add(table([ev("forward", 1.0, 2.0, step=1, rank=0)]))
    with pytest.raises(ValueError, match="holds 1 rows"):
        affected(table([ev("forward", 1.0, 2.0, step=1, rank=0)] * 2), 1, index)


@pytest.mark.parametrize("seed", range(10))
def test_zones_name_every_block_that_holds_a_key_in_a_window(seed: int) -> None:
    """_Zones: blocks of keys (some rows of another kind, blocks recomputed as a partial last
    block fills) are named for windows (lo, hi] whenever one of their rows of the kind has a
    key inside, and never when all of their keys of the kind lie outside every window."""
    rng = np.random.default_rng(seed)
    for dtype in (np.int64, np.float64):
        zones = _Zones(dtype)
        keys = np.zeros(0, dtype=dtype)
        mine = np.zeros(0, dtype=bool)
        size = int(rng.integers(1, 9))
        for _ in range(int(rng.integers(3, 15))):
            m = int(rng.integers(1, 30))
            keys = np.concatenate([keys, rng.integers(0, 100, m).astype(dtype)])
            mine = np.concatenate([mine, rng.random(m) < 0.7])
            first = (keys.size - m) // size
            a = first * size
            zones.update(first, keys[a:], mine[a:], np.arange(0, keys.size - a, size))
            edges = np.unique(rng.integers(-5, 105, int(rng.integers(2, 8)))).astype(dtype)
            lo, hi = edges[:-1], edges[1:]
            hits = mine & ((keys[:, None] > lo) & (keys[:, None] <= hi)).any(axis=1)
            want = np.unique(np.flatnonzero(hits) // size)
            got = zones.blocks(lo, hi)
            assert set(want.tolist()) <= set(got.tolist())
            for b in set(got.tolist()) - set(want.tolist()):  # named: its range meets one
                ks = keys[b * size:(b + 1) * size][mine[b * size:(b + 1) * size]]
                assert ks.size and any(ks.min() <= h and ks.max() > lo_
                                       for lo_, h in zip(lo, hi, strict=True))


@pytest.mark.parametrize("seed", range(5))
def test_pair_codes_number_pairs_as_np_unique_does(seed: int) -> None:
    """The pipeline's (series, step) pair codes (old and new points matched up) are what
    `np.unique` of the pairs as a structured array answers."""
    from ingest.pipeline.timeline import _pair_codes

    rng = np.random.default_rng(seed)
    for n in (0, 1, 7, 3000):
        pk, step = rng.integers(0, 30, n), rng.integers(-1, 2**62, n) % int(rng.integers(1, 500))
        pairs = np.empty(n, dtype=[("pk", "<i8"), ("step", "<i8")])
        pairs["pk"], pairs["step"] = pk, step
        want = np.unique(pairs, return_inverse=True)[1]
        assert _pair_codes(pk, step).tolist() == want.tolist()
