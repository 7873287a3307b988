"""ingest.core.timeline_delta: recomputing only the steps new events touch gives, step for
step, what recomputing the whole run gives — for random runs whose events arrive in random
order and pieces, the loop start, save_batches, late generations and weight syncs included."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from ingest.core import eventstore, timeline
from ingest.core.timeline_delta import affected
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
