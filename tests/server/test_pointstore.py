"""The point store: blocks per commit folded into chunks read back exactly as written.

The oracle is a plain dict replay of every write in commit order (the last write of a step
wins; a withdrawn point disappears), checked after random interleavings of writes and
compactions with tiny chunk and compaction sizes, through every reader: `load`, the series
cache (incremental and across compactions) and `changes` (replay for live pages).
"""

from __future__ import annotations

import numpy as np
import pytest
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ingest.core import pointstore
from ingest.core.commit import PointWriter
from ingest.core.pointstore import Block
from ingest.models import PointBlock, Project, Run, Series, SeriesChunk
from ingest.reads.catalog import SeriesCache

pytestmark = pytest.mark.django_db(transaction=True)

Oracle = dict[int, dict[int, tuple[float, float]]]  # series pk -> step -> (time, value)


def new_run(name: str) -> tuple[Run, list[int]]:
    project, _ = Project.objects.get_or_create(name="p")
    run = Run.objects.create(project=project, name=name, wire_name=name,
                             started_at="2026-01-01T00:00Z", updated_at="2026-01-01T00:00Z")
    pks = [Series.objects.create(run=run, sid=f"step|k{i}||", kind="step", key=f"k{i}").pk
           for i in range(3)]
    return run, pks


def commit(run: Run, writes: list[tuple[int, int, float | None]], oracle: Oracle) -> None:
    """One commit of (series pk, step, value or None to withdraw), as the ingest path makes it."""
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run.pk)
        w = PointWriter(run, {})
        for pk, step, value in writes:
            w.add_rows([f"s{pk}"], [pk], [step], [float(run.seq + 1)], [value])
            if value is None:
                oracle.setdefault(pk, {}).pop(step, None)
            else:
                oracle.setdefault(pk, {})[step] = (float(run.seq + 1), value)
        w.finish("m", run_created=False)


def as_dict(arrays: pointstore.Arrays) -> dict[int, tuple[float, float]]:
    step, time, value = arrays
    return {int(s): (float(t), float(v))
            for s, t, v in zip(step.tolist(), time.tolist(), value.tolist(), strict=True)}


writes = st.lists(st.tuples(st.integers(0, 2), st.integers(0, 40),
                            st.one_of(st.none(), st.floats(-1e6, 1e6))), min_size=1, max_size=12)
actions = st.lists(st.one_of(writes, st.just("compact"), st.just("read")), min_size=1,
                   max_size=25)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(actions)
def test_every_reader_sees_the_replayed_writes(monkeypatch: pytest.MonkeyPatch,
                                               plan: list) -> None:
    monkeypatch.setattr(pointstore, "CHUNK_POINTS", 4)
    Run.objects.filter(name="h").delete()
    run, pks = new_run("h")
    oracle: Oracle = {}
    cache, live_seq, live = SeriesCache(), 0, {pk: {} for pk in pks}
    for action in [*plan, "read"]:  # readers lag behind until a "read"
        if action == "compact":
            pointstore.compact(run.pk, min_points=1)
            continue
        if action != "read":
            commit(run, [(pks[i], step, v) for i, step, v in action], oracle)
            continue
        # The series cache, refreshed incrementally (or reloaded after compaction).
        _, cached = cache.get(run.pk, pks)
        assert {pk: as_dict(a) for pk, a in cached.items()} == \
            {pk: oracle.get(pk, {}) for pk in pks}
        # A live page replaying changes since its last seq (or told to reload).
        found = pointstore.changes(run.pk, live_seq, 10_000)
        if found is None:
            live = {pk: as_dict(a) for pk, a in pointstore.load(run.pk, pks).items()}
            live_seq = pointstore.marks(run.pk).seq
        else:
            for pk, (step, time, value) in found[0].items():
                for s, t, v in zip(step.tolist(), time.tolist(), value.tolist(), strict=True):
                    if np.isnan(v):
                        live[pk].pop(s, None)
                    else:
                        live[pk][s] = (t, v)
            live_seq = found[1]
        assert live == {pk: oracle.get(pk, {}) for pk in pks}
    fresh = pointstore.load(run.pk, pks)
    assert {pk: as_dict(a) for pk, a in fresh.items()} == {pk: oracle.get(pk, {}) for pk in pks}
    assert all(c.n <= 4 for c in SeriesChunk.objects.filter(series__run=run))


def test_a_commit_is_one_block_and_compaction_folds_it(monkeypatch: pytest.MonkeyPatch) -> None:
    run, pks = new_run("r")
    oracle: Oracle = {}
    commit(run, [(pk, step, float(step)) for pk in pks for step in range(100)], oracle)
    assert [b.n for b in PointBlock.objects.filter(run=run)] == [300]
    assert Run.objects.get(pk=run.pk).uncompacted == 300
    assert pointstore.compact(run.pk) == 0  # not due (COMPACT_POINTS)
    assert pointstore.compact(run.pk, min_points=300) == 300
    after = Run.objects.get(pk=run.pk)
    assert (after.uncompacted, after.chunked_seq, after.replay_seq) == (0, 1, 0)
    assert sorted(SeriesChunk.objects.filter(series__run=run).values_list("n", flat=True)) \
        == [100, 100, 100]
    # The folded block is kept one compaction longer (replay), then dropped.
    commit(run, [(pks[0], 100, 1.0)], oracle)
    assert pointstore.changes(run.pk, 0, 1000) is not None
    assert pointstore.compact(run.pk, min_points=1) == 1
    assert list(PointBlock.objects.filter(run=run).values_list("seq", flat=True)) == [2]
    assert pointstore.changes(run.pk, 0, 1000) is None  # too old now: the page reloads
    assert as_dict(pointstore.load(run.pk, [pks[0]])[pks[0]]) == oracle[pks[0]]


def test_a_compaction_that_lost_the_race_writes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two processes compact the same run: the second, starting from the same chunked_seq,
    finds it moved and leaves the chunks alone."""
    run, pks = new_run("race")
    commit(run, [(pks[0], s, 1.0) for s in range(10)], {})
    real_marks = pointstore.marks
    stale = real_marks(run.pk)
    assert pointstore.compact(run.pk, min_points=1) == 10
    commit(run, [(pks[0], 50, 2.0)], {})
    monkeypatch.setattr(pointstore, "marks", lambda run_id: stale)  # what it read before
    assert pointstore.compact(run.pk, min_points=1) == 0
    monkeypatch.setattr(pointstore, "marks", real_marks)
    step, _, value = pointstore.load(run.pk, [pks[0]])[pks[0]]
    assert step.tolist() == [*range(10), 50] and value[-1] == 2.0


def test_block_by_series_keeps_the_last_write_of_each_step() -> None:
    block = Block.of([7, 7, 3, 7], [1, 2, 5, 1], [0.0, 0.0, 0.0, 9.0], [1.0, 2.0, 3.0, np.nan])
    grouped = block.by_series()
    assert grouped[3][0].tolist() == [5]
    assert grouped[7][0].tolist() == [1, 2] and np.isnan(grouped[7][2][0])
    assert grouped[7][1].tolist() == [9.0, 0.0]
    back = Block.unpack(block.pack(), len(block))
    assert all(np.array_equal(getattr(back, f), getattr(block, f), equal_nan=True)
               for f in ("pk", "step", "time", "value"))


def test_merge_applies_tombstones_and_keeps_the_newest() -> None:
    old = (np.array([1, 2, 3]), np.array([10.0, 20, 30]), np.array([1.0, 2, 3]))
    new = (np.array([2, 3, 4]), np.array([21.0, 31, 40]), np.array([np.nan, 5, 4]))
    step, time, value = pointstore.merge(old, new)
    assert step.tolist() == [1, 3, 4]
    assert time.tolist() == [10.0, 31.0, 40.0]
    assert value.tolist() == [1.0, 5.0, 4.0]


def test_chunk_pack_round_trips() -> None:
    arrays = (np.array([0, 5, 2**40]), np.array([1.5, 2.5, 3.5]), np.array([-1.0, 0.0, 1e300]))
    back = pointstore.unpack(pointstore.pack(arrays), 3)
    assert all(np.array_equal(a, b) for a, b in zip(arrays, back, strict=True))
