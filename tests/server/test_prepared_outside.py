"""Ingest holds the write lock only while it writes: a frame's messages are decoded, validated
and (samples) prepared — each step's stored batch, the ranges the message spans — before the
group's transaction begins (ingest.write.frames, store.prepare), and what is stored is exactly
what a message applied without preparation stores."""

from __future__ import annotations

from typing import Any

import numpy as np
import orjson
import pytest
from django.db import connection

from ingest.models import ObservedRange, Project, SampleBatch
from ingest.write import frames, store
from ingest.write.frames import handle_frames, handle_objects
from tests.server.conftest import samples_msg, step_msg
from trainer_hooks.wire import protocol as p
from trainer_hooks.wire.protocol import encode_msgpack

pytestmark = pytest.mark.django_db(transaction=True)


def _samples(run: str, step: Any, n: int, seed: int, mid: str) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    msg = samples_msg(step, rng.normal(size=n).tolist(), run=run, mid=mid,
                      groups=(np.arange(n) // 4).tolist())
    msg["env"] = ["a" if i % 3 else "b" for i in range(n)]
    msg["metrics"] = {"len": rng.integers(1, 99, n).astype(float).tolist()}
    return msg


def _inside(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, bool]]:
    """Record, for every validation and preparation, whether a transaction was open."""
    calls: list[tuple[str, bool]] = []
    validate, prepare = p.validate_message, store.prepare

    def validated(obj: Any) -> Any:
        calls.append(("validate", connection.in_atomic_block))
        return validate(obj)

    def prepared(msg: Any) -> Any:
        calls.append(("prepare", connection.in_atomic_block))
        return prepare(msg)

    monkeypatch.setattr(p, "validate_message", validated)
    monkeypatch.setattr(frames, "prepare", prepared)
    return calls


def test_a_groups_messages_are_validated_and_prepared_before_its_transaction(
        monkeypatch: pytest.MonkeyPatch) -> None:
    pid = Project.objects.create(name="p").pk
    calls = _inside(monkeypatch)
    group: list[tuple[bytes | str, bool]] = [(encode_msgpack(_samples("r", 0, 64, 0, "s0")), True),
             (orjson.dumps([step_msg(0, {"x": 1.0}), _samples("r", [1] * 8, 8, 1, "s1")]),
              False),
             (orjson.dumps(_samples("r", 2, 16, 2, "s2")), False)]
    results = handle_frames(pid, group)
    assert [o.reply["type"] for outcomes, _ in results for o in outcomes] == ["ack"] * 4
    assert [name for name, _ in calls] == ["validate", "prepare"] * 4
    assert not any(inside for _, inside in calls), calls  # none inside the transaction
    calls.clear()
    http = handle_objects(pid, [_samples("r", 3, 8, 3, "s3")])  # the HTTP endpoint's path
    assert [o.reply["type"] for o in http] == ["ack"]
    assert calls == [("validate", False), ("prepare", False)]


def test_a_prepared_message_stores_what_an_unprepared_one_does() -> None:
    pid = Project.objects.create(name="p").pk
    for k, step in enumerate([5, [7, 6, 7, 6, 8, 8, 8, 5]]):  # one step; steps out of order
        msgs = [p.validate_message(_samples(run, step, 8 if k else 48, k, f"m{k}"))
                for run in ("prepared", "plain")]
        store.apply_message(pid, msgs[0], prepared=store.prepare(msgs[0]))
        store.apply_message(pid, msgs[1])  # prepared inside its transaction

    def stored(run: str) -> list[tuple[int, int, bytes]]:
        return [(b.step, b.n, bytes(b.data)) for b in
                SampleBatch.objects.filter(run__name=run).order_by("step", "msg_id")]

    def ranges(run: str) -> set[tuple[str, str, str, float, float]]:
        return {(r.env, r.kind, r.key, r.lo, r.hi)
                for r in ObservedRange.objects.filter(run__name=run)}

    assert stored("prepared") == stored("plain") and len(stored("plain")) == 5
    # 2 environments × 2 keys
    assert ranges("prepared") == ranges("plain") and len(ranges("plain")) == 4


def test_a_bad_message_in_a_group_is_refused_before_anything_is_written(
        monkeypatch: pytest.MonkeyPatch) -> None:
    pid = Project.objects.create(name="p").pk
    calls = _inside(monkeypatch)
    bad = {**_samples("r", 0, 4, 0, "bad"), "reward": ["x"] * 4}
    results = handle_frames(pid, [(orjson.dumps(bad), False),
                                  (orjson.dumps(_samples("r", 0, 4, 1, "good")), False)])
    (first,), (second,) = (outcomes for outcomes, _ in results)
    assert first.reply["type"] == "error" and first.reply["field"] == "reward"
    assert second.reply == {"type": "ack", "id": "good"}
    assert calls == [("validate", False), ("validate", False), ("prepare", False)]
    assert SampleBatch.objects.filter(msg_id="bad").count() == 0
