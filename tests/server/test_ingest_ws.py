"""The WebSocket ingest consumer against the full ASGI application."""

from __future__ import annotations

import math
from typing import Any

import msgpack
import pytest
from channels.db import database_sync_to_async

from ingest.models import IngestedMessage, PointBlock, Run, SampleBatch, Series
from tests.server.conftest import Trainer, ingest_communicator, samples_msg, settled, step_msg
from tests.support.points import point_rows
from tests.support.points import values as point_values

pytestmark = pytest.mark.django_db(transaction=True)


@database_sync_to_async
def table_counts() -> tuple[int, ...]:
    return tuple(m.objects.count()
                 for m in (Run, Series, PointBlock, SampleBatch, IngestedMessage))


@database_sync_to_async
def values(key: str) -> dict[int, float]:
    return point_values(point_rows(), key=key, kind="step")


async def test_it_rejects_a_missing_token(transactional_db: None) -> None:
    comm = ingest_communicator(None)
    await comm.connect()
    assert (await comm.receive_output(5))["code"] == 4401


async def test_it_rejects_a_bad_token(token: str) -> None:
    comm = ingest_communicator(token + "x")
    await comm.connect()
    assert (await comm.receive_output(5))["code"] == 4401
    assert await table_counts() == (0, 0, 0, 0, 0)


async def test_it_acks_a_step_after_it_is_committed(trainer: Trainer) -> None:
    reply = await trainer.send(step_msg(3, {"entropy": 1.5, "loss/policy": -0.25}))
    assert reply == {"type": "ack", "id": "step-3"}
    # Read from another thread's connection: the ack means the data is durable and visible.
    assert await values("entropy") == {3: 1.5}
    assert await values("loss/policy") == {3: -0.25}


async def test_a_duplicate_message_is_acked_and_changes_nothing(trainer: Trainer) -> None:
    msg = samples_msg(0, [1.0, 0.0, 1.0], mid="batch-1")
    assert (await trainer.send(msg)) == {"type": "ack", "id": "batch-1"}
    await settled()
    before = await table_counts()
    again = await trainer.send(msg)
    assert again == {"type": "ack", "id": "batch-1", "duplicate": True}
    await settled()
    assert await table_counts() == before
    count = await database_sync_to_async(
        lambda: point_values(point_rows(), sid="reward|reward|count|")[0])()
    assert count == 3.0


async def test_msgpack_frames_are_accepted_and_nan_is_counted_not_stored(
        trainer: Trainer) -> None:
    frame = msgpack.packb(step_msg(1, {"kl": math.nan, "lr": math.inf, "ok": 2.0}))
    assert (await trainer.send_raw(data=frame))["type"] == "ack"
    assert await values("ok") == {1: 2.0}
    assert await values("kl") == {}
    counts = await database_sync_to_async(
        lambda: dict(Series.objects.values_list("key", "nonfinite_count")))()
    assert counts == {"ok": 0, "kl": 1, "lr": 1}


async def test_the_connection_stays_open_after_an_error(trainer: Trainer) -> None:
    assert (await trainer.send(step_msg(-1, {"a": 1.0})))["type"] == "error"
    assert (await trainer.send(step_msg(1, {"a": 1.0})))["type"] == "ack"


LONG = "x" * 201
BAD_MESSAGES: list[tuple[str, Any, str, str | None]] = [
    ("unknown type", {**step_msg(0, {}), "type": "stepz"}, "unknown_type", "type"),
    ("wrong version", {**step_msg(0, {}), "v": 2}, "bad_version", "v"),
    ("missing id", {k: v for k, v in step_msg(0, {}).items() if k != "id"}, "missing_field",
     "id"),
    ("missing run", {k: v for k, v in step_msg(0, {}).items() if k != "run"}, "missing_field",
     "run"),
    ("missing step", {k: v for k, v in step_msg(0, {}).items() if k != "step"},
     "missing_field", "step"),
    ("missing metrics", {k: v for k, v in step_msg(0, {}).items() if k != "metrics"},
     "missing_field", "metrics"),
    ("step as string", step_msg(0, {}) | {"step": "3"}, "wrong_type", "step"),
    ("step as float", step_msg(0, {}) | {"step": 3.0}, "wrong_type", "step"),
    ("negative step", step_msg(-5, {"a": 1.0}), "invalid", "step"),
    ("metrics not an object", step_msg(0, [1, 2]), "wrong_type", "metrics"),
    ("empty key segment", step_msg(0, {"loss//policy": 1.0}), "bad_key", "metrics.loss//policy"),
    ("trailing slash", step_msg(0, {"loss/": 1.0}), "bad_key", "metrics.loss/"),
    ("key too long", step_msg(0, {LONG: 1.0}), "bad_key", f"metrics.{LONG}"),
    ("control character", step_msg(0, {"a\x07b": 1.0}), "bad_key", "metrics.a\x07b"),
    ("bad run name", step_msg(0, {"a": 1.0}, run="a\nb"), "bad_key", "run"),
    ("time not a number", step_msg(0, {"a": 1.0}, time="now"), "wrong_type", "time"),
    ("samples missing reward", {k: v for k, v in samples_msg(0, [1.0]).items()
                                if k != "reward"}, "missing_field", "reward"),
    ("samples missing group_id", {k: v for k, v in samples_msg(0, [1.0]).items()
                                  if k != "group_id"}, "missing_field", "group_id"),
    ("samples missing sample_id", {k: v for k, v in samples_msg(0, [1.0]).items()
                                   if k != "sample_id"}, "missing_field", "sample_id"),
    ("samples missing step", {k: v for k, v in samples_msg(0, [1.0]).items()
                              if k != "step"}, "missing_field", "step"),
    ("columns of different lengths", samples_msg(0, [1.0, 2.0]) | {"group_id": [0]},
     "length_mismatch", "group_id"),
    ("metric column too short", samples_msg(0, [1.0, 2.0], metrics={"m": [1.0]}),
     "length_mismatch", "metrics.m"),
    ("reward not numeric", samples_msg(0, [1.0, "1"]), "wrong_type", "reward"),
    ("reward boolean", samples_msg(0, [1.0, True]), "wrong_type", "reward"),
    ("negative sample step", samples_msg([0, -1], [1.0, 2.0]), "invalid", "step"),
    ("step list of floats", samples_msg([0.0, 1.0], [1.0, 2.0]), "wrong_type", "step"),
    ("sample metric not numeric", samples_msg(0, [1.0], metrics={"m": ["x"]}), "wrong_type",
     "metrics.m"),
    ("sample metric bad name", samples_msg(0, [1.0], metrics={"": [1.0]}), "bad_key",
     "metrics."),
    ("unknown discard reason", samples_msg(0, [1.0], discard_reason=["late"]), "invalid",
     "discard_reason"),
    ("env not a string", samples_msg(0, [1.0], env=[3]), "wrong_type", "env"),
    ("group id as object", samples_msg(0, [1.0], groups=[{"g": 1}]), "wrong_type", "group_id"),
    ("empty samples", samples_msg(0, []), "invalid", "reward"),
    ("ranges not a list", {"v": 1, "id": "x", "type": "ranges", "run": "r",
                           "environments": {"name": "a"}}, "wrong_type", "environments"),
    ("range max below min", {"v": 1, "id": "x", "type": "ranges", "run": "r",
                             "environments": [{"name": "a", "reward_min": 1, "reward_max": 0}]},
     "invalid", "environments[0].reward_max"),
    ("metric range not numeric", {"v": 1, "id": "x", "type": "ranges", "run": "r",
                                  "environments": [{"name": "a", "metrics_ranges":
                                                    {"m": {"min": "0"}}}]},
     "wrong_type", "environments[0].metrics_ranges.m.min"),
    ("bad run status", {"v": 1, "id": "x", "type": "run.end", "run": "r", "status": "ok"},
     "invalid", "status"),
    ("config not an object", {"v": 1, "id": "x", "type": "run.start", "run": "r",
                              "config": [1]}, "wrong_type", "config"),
    ("message not an object", "just a string", "wrong_type", None),
]


@pytest.mark.parametrize(("case", "msg", "code", "field"), BAD_MESSAGES,
                         ids=[c[0] for c in BAD_MESSAGES])
async def test_a_bad_message_gets_an_error_naming_the_field_and_writes_nothing(
        trainer: Trainer, case: str, msg: Any, code: str, field: str | None) -> None:
    reply = await trainer.send(msg)
    assert reply["type"] == "error", case
    assert (reply["code"], reply["field"]) == (code, field)
    assert reply["message"]
    assert await table_counts() == (0, 0, 0, 0, 0)


@pytest.mark.parametrize(("frame", "binary"), [
    ('{"v": 1, "id": "x", "type": "step",', False),
    ("not json at all", False),
    (b"\xc1\xff\x00", True),
    (b"\x81", True),
])
async def test_an_unparseable_frame_gets_a_bad_frame_error(
        trainer: Trainer, frame: Any, binary: bool) -> None:
    reply = await (trainer.send_raw(data=frame) if binary else trainer.send_raw(text=frame))
    assert reply["type"] == "error"
    assert reply["code"] == "bad_frame"
    assert await table_counts() == (0, 0, 0, 0, 0)


async def test_a_message_over_the_size_limit_closes_with_4413(
        token: str, settings: Any) -> None:
    settings.TELESCOPE_MAX_MESSAGE_BYTES = 1000
    comm = ingest_communicator(token)
    await comm.connect()
    await comm.send_to(text_data='{"v": 1, "pad": "' + "x" * 2000 + '"}')
    assert (await comm.receive_output(5))["code"] == 4413
    assert await table_counts() == (0, 0, 0, 0, 0)


async def test_a_flood_of_messages_closes_with_4429(token: str, settings: Any) -> None:
    settings.TELESCOPE_MAX_MESSAGES_PER_SECOND = 1
    settings.TELESCOPE_RATE_BURST = 3
    comm = ingest_communicator(token)
    await comm.connect()
    trainer = Trainer(comm)
    for i in range(3):
        assert (await trainer.send(step_msg(i, {"a": 1.0})))["type"] == "ack"
    await comm.send_to(text_data='{"v": 1}')
    assert (await comm.receive_output(5))["code"] == 4429
