"""Hostile input found by trying the server as an attacker would (issue: hardening): each case
gets an error naming its field — never a crash (WebSocket 1011, HTTP 500) or a partial write."""

from __future__ import annotations

import json
import re
from typing import Any

import msgpack
import orjson
import pytest
from django.test import Client

from ingest.models import Environment, Run, SampleBatch
from ingest.write.auth import create_token
from tests.server.conftest import Page, Trainer

pytestmark = pytest.mark.django_db(transaction=True)


def start(**extra: Any) -> dict[str, Any]:
    return {"v": 1, "id": "s", "type": "run.start", "run": "r", **extra}


def samples(**extra: Any) -> dict[str, Any]:
    return {"v": 1, "id": "x", "type": "samples", "run": "r", "step": 0, "sample_id": [1, 2],
            "group_id": [1, 1], "reward": [0.0, 1.0], **extra}


def deep(depth: int) -> dict[str, Any]:
    node: dict[str, Any] = {"leaf": 1}
    for _ in range(depth):
        node = {"a": node}
    return node


CASES = [
    ("time far in the future", start(time=1e300), "time"),
    ("time before 1970", start(time=-1e18), "time"),
    ("time in milliseconds", start(time=1.7e12), "time"),
    ("config with NaN", start(config={"lr": float("nan")}), "config"),
    ("config 1,000 deep", start(config=deep(1000)), "config"),
    ("env of 1 MB", samples(env="e" * (1 << 20)), "env"),
    ("env with NUL", samples(env=["a", "b\x00c"]), "env"),
    ("env with a newline", samples(env="a\nb"), "env"),
    ("reward_min NaN", {"v": 1, "id": "g", "type": "ranges", "run": "r",
                        "environments": [{"name": "a", "reward_min": float("nan")}]},
     "environments[0].reward_min"),
    # NUL: PostgreSQL's text and jsonb cannot hold it (a database error quoting SQL there),
    # numpy drops it at the end of a string (SQLite stored 'b\0' as 'b').
    ("config string with NUL", start(config={"a": {"b": ["x\x00y"]}}), "config"),
    ("config key with NUL", start(config={"a\x00": 1}), "config"),
    ("message id with NUL", start(id="s\x00"), "id"),
    ("sample_id with NUL", samples(sample_id=["a\x00b", "c"]), "sample_id"),
    ("env with a trailing NUL", samples(env=["a", "b\x00"]), "env"),
    ("samples time in milliseconds", samples(time=[1.7e9, 1.7e12]), "time"),
    ("version true", start(v=True), "v"),
    ("version 1.0", start(v=1.0), "v"),
]
SQL = re.compile(r"\b(SELECT|INSERT|UPDATE|DETAIL|CONTEXT)\b|ingest_")


@pytest.mark.parametrize(("case", "msg", "field"), CASES, ids=[c[0] for c in CASES])
async def test_hostile_messages_get_an_error_naming_the_field(
        trainer: Trainer, case: str, msg: dict[str, Any], field: str) -> None:
    frame = msgpack.packb(msg, use_bin_type=True)
    reply = await trainer.send_raw(data=frame)
    assert reply["type"] == "error" and reply["field"] == field, (case, reply)
    assert not SQL.search(reply["message"]), reply
    assert await _nothing_written()


async def test_a_misspelt_samples_column_is_named_in_the_ack_and_the_rest_stored(
        trainer: Trainer) -> None:
    reply = await trainer.send(samples(advantages=[0.5, -0.5]))
    assert reply["type"] == "ack" and set(reply.get("left_out", {})) == {"advantages"}, reply
    assert "did you mean 'advantage'?" in reply["left_out"]["advantages"]
    from channels.db import database_sync_to_async

    assert await database_sync_to_async(SampleBatch.objects.count)() == 1


def test_a_value_the_database_refuses_is_answered_without_the_sql(
        transactional_db: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """What PostgreSQL said of a NUL before the validator refused it: its first line is the
    reason, the next ones quote the statement; the client gets the reason alone."""
    from django.db import DataError

    from ingest.models import Project
    from ingest.write import frames

    def refuse(*args: Any) -> None:
        raise DataError("unsupported Unicode escape sequence\nLINE 1: ...INTO \"ingest_run\" "
                        "(\"config\") VALUES ('{\"a\": \"\\u0000\"}'::jsonb)\n"
                        "DETAIL:  \\u0000 cannot be converted to text.")

    monkeypatch.setattr(frames, "apply_message", refuse)
    reply = frames.handle_object(Project.objects.create(name="p").pk, start()).reply
    assert reply == {"type": "error", "id": "s", "code": "unstorable", "field": None,
                     "message": "not stored: unsupported Unicode escape sequence"}


async def test_config_with_bytes_or_deep_msgpack_names_config(
        trainer: Trainer) -> None:
    for config in ({"blob": b"\x00\x01"}, deep(1020)):
        frame = msgpack.packb(start(config=config), use_bin_type=True)
        reply = await trainer.send_raw(data=frame)
        assert reply["type"] == "error" and reply["field"] == "config", reply
    assert await _nothing_written()


async def _nothing_written() -> bool:
    from channels.db import database_sync_to_async

    return await database_sync_to_async(
        lambda: not (Run.objects.exists() or SampleBatch.objects.exists()
                     or Environment.objects.exists()))()


@pytest.mark.parametrize("field", ["run", "after_seq"])
async def test_a_live_subscribe_with_a_huge_number_gets_an_error(page: Page, field: str) -> None:
    msg = {"type": "subscribe", "run": 1, "after_seq": 0, field: 2**70}
    await page.comm.send_to(text_data=json.dumps(msg))  # (orjson cannot write 2**70)
    reply = await page.recv()
    assert reply["type"] == "error"


def test_http_bodies_under_the_limit_are_taken_and_over_it_get_a_json_413(
        transactional_db: None, settings: Any) -> None:
    token = create_token("proj")[1]
    auth = {"HTTP_AUTHORIZATION": f"Bearer {token}"}
    n = 70_000  # about 3.5 MiB of JSON: above Django's own 2.5 MiB default
    body = json.dumps(samples(sample_id=[f"sample-{i:08d}" for i in range(n)],
                              group_id=[f"group-{i:08d}" for i in range(n)],
                              reward=[0.123456789] * n))
    assert 2.9 * (1 << 20) < len(body) < 8 * (1 << 20)
    response = Client().post("/api/ingest", body, content_type="application/json", **auth)
    assert response.status_code == 200, response.content[:200]
    assert len(orjson.loads(response.content)["acks"]) == 1
    settings.TELESCOPE_MAX_MESSAGE_BYTES = 1 << 20
    response = Client().post("/api/ingest", body, content_type="application/json", **auth)
    assert response.status_code == 413 and "limit" in orjson.loads(response.content)["error"]
