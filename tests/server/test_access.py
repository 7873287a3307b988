"""Reads from other than loopback need a signed-in user (or TELESCOPE_PUBLIC_READ=1); ingest,
health and login stay open."""

from __future__ import annotations

from typing import Any

import pytest
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User
from django.test import Client

from ingest.write.auth import create_token
from telescope_ui.asgi import application

pytestmark = pytest.mark.django_db(transaction=True)
REMOTE = {"REMOTE_ADDR": "10.1.2.3"}


def test_remote_readers_must_sign_in(settings: Any) -> None:
    remote = Client(**REMOTE)
    page = remote.get("/")
    assert page.status_code == 302 and page["Location"].startswith("/accounts/login/")
    assert remote.get("/api/runs").status_code == 401
    assert remote.get("/accounts/login/").status_code == 200
    assert remote.get("/healthz").status_code == 200
    token = create_token("proj")[1]
    ingest = remote.post("/api/ingest", {"v": 1, "id": "a", "type": "step", "run": "r",
                                         "step": 0, "metrics": {"x": 1.0}},
                         content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert ingest.status_code == 200
    User.objects.create_user("ada", password="lovelace-1843")
    assert remote.login(username="ada", password="lovelace-1843")
    assert remote.get("/api/runs").status_code == 200 and remote.get("/").status_code == 200
    settings.TELESCOPE_PUBLIC_READ = True
    assert Client(**REMOTE).get("/api/runs").status_code == 200


def test_signing_out_returns_to_the_sign_in_page_and_needs_the_csrf_token() -> None:
    User.objects.create_user("ada", password="lovelace-1843")
    remote = Client(enforce_csrf_checks=True, **REMOTE)
    assert remote.login(username="ada", password="lovelace-1843")
    assert remote.get("/accounts/login/").status_code == 200  # sets the csrftoken cookie
    assert remote.post("/accounts/logout/").status_code == 403  # no token: not signed out
    assert remote.get("/api/runs").status_code == 200
    csrf = remote.cookies["csrftoken"].value
    out = remote.post("/accounts/logout/", {"csrfmiddlewaretoken": csrf})
    assert out.status_code == 302 and out["Location"] == "/accounts/login/"
    assert remote.get("/api/runs").status_code == 401


def test_loopback_readers_need_no_account() -> None:
    assert Client(REMOTE_ADDR="127.0.0.1").get("/api/runs").status_code == 200


@pytest.mark.parametrize(("client", "allowed"), [(("10.1.2.3", 5000), False),
                                                 (("127.0.0.1", 5000), True)])
async def test_live_updates_from_afar_need_a_signed_in_user(
        transactional_db: None, client: tuple[str, int], allowed: bool) -> None:
    comm = WebsocketCommunicator(application, "/ws/live/", headers=[
        (b"origin", b"http://127.0.0.1:8000"), (b"host", b"127.0.0.1:8000")])
    comm.scope["client"] = list(client)
    connected, code = await comm.connect()
    if allowed:
        assert connected
    else:
        assert not connected or (await comm.receive_output(5))["code"] == 4403
    await comm.disconnect()
