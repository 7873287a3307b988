"""Series snapshots: a read through a snapshot plus later points equals a read of all points."""

from __future__ import annotations

import numpy as np
import pytest

from ingest import compact
from ingest.models import Point, Project, Series, SeriesSnapshot
from ingest.series_ids import series_id
from ingest.service import handle_object

pytestmark = pytest.mark.django_db(transaction=True)


def rows_only(pk: int) -> tuple[list[int], list[float]]:
    points = Point.objects.filter(series_id=pk, value__isnull=False).order_by("step")
    return list(points.values_list("step", flat=True)), list(points.values_list("value",
                                                                                 flat=True))


def test_snapshot_plus_later_points_equals_all_points(transactional_db: None,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compact, "COMPACT_AFTER", 10)
    project = Project.objects.create(name="p").pk
    rng = np.random.default_rng(3)
    for i, v in enumerate(rng.normal(0, 1, 25)):
        handle_object(project, {"v": 1, "id": f"a{i}", "type": "step", "run": "r", "step": i,
                                "metrics": {"loss": float(v)}})
    pk = Series.objects.get(sid=series_id("step", "loss")).pk
    assert compact.compact_run(Series.objects.get(pk=pk).run_id) == 1
    snap = SeriesSnapshot.objects.get(series_id=pk)
    assert snap.n == 25
    # Later writes: a new step, and an overwrite of a step inside the snapshot.
    handle_object(project, {"v": 1, "id": "late", "type": "step", "run": "r", "step": 30,
                            "metrics": {"loss": 7.0}})
    handle_object(project, {"v": 1, "id": "redo", "type": "step", "run": "r", "step": 4,
                            "metrics": {"loss": -3.0}})
    step, _, value = compact.load([pk])[pk]
    assert (step.tolist(), value.tolist()) == rows_only(pk)
    assert value[step.tolist().index(4)] == -3.0


def test_merge_applies_tombstones_and_keeps_the_newest() -> None:
    old = (np.array([1, 2, 3]), np.array([10.0, 20, 30]), np.array([1.0, 2, 3]))
    new = (np.array([2, 4, 3]), np.array([21.0, 40, 31]), np.array([np.nan, 4, 5]))
    step, time, value = compact.merge(old, new)
    assert step.tolist() == [1, 3, 4]
    assert time.tolist() == [10.0, 31.0, 40.0]
    assert value.tolist() == [1.0, 5.0, 4.0]


def test_pack_round_trips() -> None:
    arrays = (np.array([0, 5, 2**40]), np.array([1.5, 2.5, 3.5]), np.array([-1.0, 0.0, 1e300]))
    back = compact.unpack(compact.pack(arrays), 3)
    assert all(np.array_equal(a, b) for a, b in zip(arrays, back, strict=True))
