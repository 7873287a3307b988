"""Names that cannot deceive, end to end: over HTTP ingest and the WebSocket a bidi override in
a run name is an error reply naming `run` (nothing stored), and a PATCHed run name with one is
a 400 naming `name`."""

from __future__ import annotations

import orjson
import pytest
from django.test import Client

from ingest.models import Run
from ingest.write.auth import create_token
from tests.server.conftest import Trainer, step_msg

pytestmark = pytest.mark.django_db(transaction=True)
EVIL = "evil\u202etxt.exe"


def test_http_ingest_refuses_a_bidi_override_in_a_run_name() -> None:
    token = create_token("proj")[1]
    res = Client().post("/api/ingest", orjson.dumps(step_msg(0, {"x": 1.0}, run=EVIL)),
                        content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}")
    [error] = res.json()["errors"]
    assert (error["code"], error["field"]) == ("bad_key", "run") and "U+202E" in error["message"]
    assert not Run.objects.exists()


async def test_websocket_ingest_refuses_a_zero_width_space_in_a_key(trainer: Trainer) -> None:
    reply = await trainer.send(step_msg(0, {"lo\u200bss": 1.0}))
    assert reply["type"] == "error" and reply["field"] == "metrics.lo\u200bss"


def test_a_patched_run_name_with_a_bidi_override_is_refused() -> None:
    token = create_token("proj")[1]
    Client().post("/api/ingest", orjson.dumps(step_msg(0, {"x": 1.0})),
                  content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}")
    run = Run.objects.get()
    res = Client().patch(f"/api/runs/{run.pk}", orjson.dumps({"name": EVIL}),
                         content_type="application/json")
    assert res.status_code == 400 and res.json()["field"] == "name"
    assert Run.objects.get().name == "r"
