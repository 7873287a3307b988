"""POST /api/ingest: the same decode/validate path as the WebSocket."""

from __future__ import annotations

import msgpack
import numpy as np
import orjson
import pytest
import zstandard
from django.test import Client

from ingest.models import Run
from ingest.reads import catalog as reads
from tests.server.conftest import samples_msg, step_msg
from tests.support.points import point_rows, values
from trainer_hooks.wire.protocol import encode_msgpack
from trainer_hooks.wire.texts import TEXT

pytestmark = pytest.mark.django_db(transaction=True)


def post(client: Client, token: str | None, body: bytes,
         content_type: str = "application/json") -> tuple[int, dict]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    response = client.post("/api/ingest", body, content_type=content_type, headers=headers)
    return response.status_code, orjson.loads(response.content)


@pytest.fixture
def client() -> Client:
    return Client(enforce_csrf_checks=True)


def test_it_ingests_a_list_and_reports_acks_and_errors(client: Client, token: str) -> None:
    body = orjson.dumps([step_msg(0, {"a": 1.0}), step_msg(-1, {"a": 1.0}, mid="bad"),
                         samples_msg(0, [0.5, 1.5])])
    status, reply = post(client, token, body)
    assert status == 200
    assert reply["acks"] == [{"type": "ack", "id": "step-0"}, {"type": "ack", "id": "s1"}]
    assert [(e["id"], e["field"]) for e in reply["errors"]] == [("bad", "step")]
    # The request does not aggregate (that is the pipeline's work) ...
    assert not values(point_rows(), sid="reward|reward|mean|")
    assert reads.pending_steps(Run.objects.get(name="r").pk) == 1
    # ... but a barrier answers once the run's aggregates are readable.
    status, reply = post(client, token, orjson.dumps(
        {"v": 1, "id": "b", "type": "barrier", "run": "r"}))
    assert status == 200 and reply["acks"] == [{"type": "ack", "id": "b"}]
    assert values(point_rows(), sid="reward|reward|mean|") == {0: 1.0}


def test_it_accepts_msgpack(client: Client, token: str) -> None:
    status, reply = post(client, token, msgpack.packb(step_msg(2, {"a": 3.0})),
                         "application/msgpack")
    assert status == 200 and reply["acks"] == [{"type": "ack", "id": "step-2"}]


def test_it_rejects_a_bad_token_with_401(client: Client, token: str) -> None:
    status, _ = post(client, token[:-1], orjson.dumps(step_msg(0, {"a": 1.0})))
    assert status == 401
    status, _ = post(client, None, orjson.dumps(step_msg(0, {"a": 1.0})))
    assert status == 401
    assert Run.objects.count() == 0


def test_it_rejects_an_unparseable_body_with_400(client: Client, token: str) -> None:
    status, reply = post(client, token, b"{nope")
    assert status == 400 and "JSON" in reply["error"]


def test_it_rejects_a_body_over_the_limit_with_413(client: Client, token: str,
                                                   settings) -> None:  # type: ignore[no-untyped-def]
    settings.TELESCOPE_MAX_MESSAGE_BYTES = 100
    status, _ = post(client, token, orjson.dumps(step_msg(0, {"a" * 50: 1.0, "b" * 50: 2.0})))
    assert status == 413
    assert Run.objects.count() == 0


def test_a_resent_message_is_a_duplicate(client: Client, token: str) -> None:
    body = orjson.dumps(step_msg(0, {"a": 1.0}))
    post(client, token, body)
    _, reply = post(client, token, body)
    assert reply["acks"] == [{"type": "ack", "id": "step-0", "duplicate": True}]


def test_it_takes_packed_text_and_names_a_bad_packed_column(client: Client, token: str) -> None:
    """Text packed as trainer_hooks sends it (trainer_hooks.wire.texts) over HTTP too; a
    packed column whose text is not UTF-8 is refused naming it, its message not stored."""
    good = {**samples_msg(0, [0.5, 1.5]), "completion": ["ünïcode ✓", None]}
    noise = bytes(range(32, 127)) * 2000 + b"\xff"  # large: checked on the helper thread
    frame = zstandard.ZstdCompressor(write_content_size=True).compress(noise)
    bad = {**samples_msg(1, [0.5, 1.5], mid="bad"), "prompt": msgpack.ExtType(TEXT, msgpack.packb(
        [np.array([0, 1], "<i4").tobytes(), np.array([len(noise) - 1, 1], "<i4").tobytes(),
         frame]))}
    body = msgpack.packb([msgpack.unpackb(encode_msgpack(good)), bad])
    status, reply = post(client, token, body, "application/msgpack")
    assert status == 200 and reply["acks"] == [{"type": "ack", "id": good["id"]}]
    [error] = reply["errors"]
    assert (error["id"], error["code"], error["field"]) == ("bad", "invalid", "prompt")
    rid = Run.objects.get(name="r").pk
    got = client.get(f"/api/runs/{rid}/samples", {"step": 0, "text": 1}).json()["samples"]
    assert sorted((s["reward"], s["completion"]) for s in got) == [(0.5, "ünïcode ✓"),
                                                                  (1.5, None)]
    assert client.get(f"/api/runs/{rid}/samples", {"step": 1}).json()["samples"] == []
