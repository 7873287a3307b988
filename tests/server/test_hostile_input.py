"""Hostile input found by trying the server as an attacker would (issue: hardening): each case
gets an error naming its field — never a crash (WebSocket 1011, HTTP 500) or a partial write."""

from __future__ import annotations

import json
from typing import Any

import msgpack
import orjson
import pytest
from django.test import Client

from ingest.auth import create_token
from ingest.models import Environment, Run, SampleBatch
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
]


@pytest.mark.parametrize(("case", "msg", "field"), CASES, ids=[c[0] for c in CASES])
async def test_hostile_messages_get_an_error_naming_the_field(
        trainer: Trainer, case: str, msg: dict[str, Any], field: str) -> None:
    frame = msgpack.packb(msg, use_bin_type=True)
    reply = await trainer.send_raw(data=frame)
    assert reply["type"] == "error" and reply["field"] == field, (case, reply)
    assert await _nothing_written()


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
