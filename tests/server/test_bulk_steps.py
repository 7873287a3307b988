"""Consecutive step messages of a batch written as one (ingest.write.bulk) give exactly what the
message-by-message path gives: the same replies, the same stored points."""

from __future__ import annotations

from typing import Any

import pytest

from ingest.models import PointBlock, Project
from ingest.write import bulk
from ingest.write.frames import handle_objects
from tests.support.points import point_rows

pytestmark = pytest.mark.django_db(transaction=True)


def step(step: int, metrics: dict[str, Any], mid: str, run: str = "r") -> dict[str, Any]:
    return {"v": 1, "id": mid, "type": "step", "run": run, "step": step, "time": 100.0 + step,
            "metrics": metrics}


def frames() -> list[list[dict[str, Any]]]:
    first = [step(0, {"a": 1.0}, "s0"), step(1, {"a": 2.0, "b": 5.0}, "s1")]
    second = [
        step(2, {"a": 3.0}, "s2"),
        step(1, {"a": 99.0}, "s1"),  # applied in the first frame: a duplicate
        step(3, {"a": 4.0, "c": 7.0}, "s3"),
        step(3, {"a": 98.0}, "s3"),  # repeated within the batch: the first one counts
        {"v": 1, "id": "bad", "type": "step", "run": "r", "step": -1, "metrics": {}},
        step(4, {"a": 5.0}, "s4"),
        step(4, {"x": 1.0}, "o4", run="other"),  # another run breaks the group
        step(5, {"a": 6.0, "state": "ok"}, "s5"),  # a string value: the slow path
        step(6, {"a": 7.0}, "s6"),
        step(7, {"state": 1.0, "a": 8.0}, "s7"),  # a number for a string key: ...
        step(8, {"a": 9.0}, "s8"),  # ... its group falls back, then is left out as alone
        step(9, {"a": None, "b": 1.0}, "s9"),  # a null: the slow path
    ]
    return [first, second]


def ingest(project: str, grouped: bool, monkeypatch: pytest.MonkeyPatch
           ) -> tuple[list[list[dict[str, Any]]], set[tuple[str, str, int, float | None]]]:
    monkeypatch.setattr(bulk, "MIN_GROUP", 2 if grouped else 10**9)
    pid = Project.objects.create(name=project).pk
    replies = [[o.reply for o in handle_objects(pid, frame)] for frame in frames()]
    points = {(p.run_name, p.sid, p.step, p.value) for p in point_rows(project_id=pid)}
    return replies, points


def test_grouped_steps_store_and_reply_exactly_as_one_by_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    grouped = ingest("grouped", True, monkeypatch)
    alone = ingest("alone", False, monkeypatch)
    assert grouped == alone
    replies, points = grouped
    assert [r.get("duplicate", False) for r in replies[1]][:4] == [False, True, False, True]
    assert replies[1][4]["type"] == "error" and replies[1][4]["field"] == "step"
    assert ("r", "step|a||", 3, 4.0) in points and ("r", "step|a||", 1, 2.0) in points
    assert "metrics.state" in replies[1][9].get("left_out", {}), replies


def test_a_group_is_one_write_under_one_sequence_number(monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    monkeypatch.setattr(bulk, "MIN_GROUP", 2)
    pid = Project.objects.create(name="p").pk
    frame = [step(s, {"a": float(s), "b": 1.0}, f"m{s}") for s in range(50)]
    outcomes = handle_objects(pid, frame)
    assert [o.reply for o in outcomes] == [{"type": "ack", "id": f"m{s}"} for s in range(50)]
    blocks = PointBlock.objects.filter(run__project_id=pid)  # one commit: one block
    assert [b.n for b in blocks] == [100] and len(point_rows(project_id=pid)) == 100
    assert len(outcomes[0].live_points()["step|a||"]["step"]) == 50  # what live pages get
