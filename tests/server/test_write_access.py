"""TELESCOPE_PUBLIC_READ=1 opens reading, never writing: every state-changing endpoint refuses
an anonymous remote client (401, nothing changed) even with a valid CSRF token, takes a
signed-in one, and refuses a signed-in one whose request comes from a foreign origin (CSRF)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from django.contrib.auth.models import User
from django.test import Client

from ingest.models import Run
from ingest.write.auth import create_token

pytestmark = pytest.mark.django_db(transaction=True)
REMOTE = {"REMOTE_ADDR": "10.1.2.3"}
LAYOUT = {"version": 2, "sections": []}

# (method, path under /api/runs/<id>, body)
WRITES = [
    ("patch", "", {"notes": "changed"}),
    ("patch", "", {"name": "renamed"}),
    ("patch", "", {"color": "#000000"}),
    ("put", "/layout", LAYOUT),
    ("patch", "/layout", {"name": "other"}),
    ("delete", "/layout", None),
    ("put", "/templates?name=mine", LAYOUT),
    ("delete", "/templates?name=mine", None),
    ("delete", "", None),
]


@pytest.fixture
def run_id(settings: Any) -> int:
    settings.TELESCOPE_PUBLIC_READ = True
    token = create_token("proj")[1]
    res = Client().post("/api/ingest", {"v": 1, "id": "a", "type": "step", "run": "r",
                                        "step": 0, "metrics": {"x": 1.0}},
                        content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert res.status_code == 200
    pk = Run.objects.get().pk
    # a saved dashboard (to rename and delete), saved from loopback
    assert Client().put(f"/api/runs/{pk}/layout", orjson.dumps(LAYOUT),
                        content_type="application/json").status_code == 200
    return pk


def csrf_client(signed_in: bool) -> tuple[Client, str]:
    client = Client(enforce_csrf_checks=True, **REMOTE)
    if signed_in:
        if not User.objects.filter(username="ada").exists():
            User.objects.create_user("ada", password="lovelace-1843")
        assert client.login(username="ada", password="lovelace-1843")
    assert client.get("/").status_code == 200  # a page: the csrftoken cookie
    return client, client.cookies["csrftoken"].value


def write(client: Client, csrf: str, method: str, path: str, body: Any,
          **extra: Any) -> int:
    data = b"" if body is None else orjson.dumps(body)
    return getattr(client, method)(path, data, content_type="application/json",
                                   HTTP_X_CSRFTOKEN=csrf, **extra).status_code


def snapshot(run_id: int) -> Any:
    run = Run.objects.filter(pk=run_id).values("name", "notes", "color").first()
    return run, Client().get(f"/api/runs/{run_id}/layout").json(), \
        Client().get(f"/api/runs/{run_id}/templates").json()


@pytest.mark.parametrize(("method", "path", "body"), WRITES)
def test_an_anonymous_reader_changes_nothing(run_id: int, method: str, path: str,
                                             body: Any) -> None:
    client, csrf = csrf_client(signed_in=False)
    assert client.get(f"/api/runs/{run_id}").status_code == 200  # reading is open
    before = snapshot(run_id)
    status = write(client, csrf, method, f"/api/runs/{run_id}{path}", body)
    assert status == 401
    assert snapshot(run_id) == before


@pytest.mark.parametrize(("method", "path", "body"), WRITES)
def test_a_signed_in_user_may_write(run_id: int, method: str, path: str, body: Any) -> None:
    client, csrf = csrf_client(signed_in=True)
    assert write(client, csrf, method, f"/api/runs/{run_id}{path}", body) == 200


@pytest.mark.parametrize(("method", "path", "body"), WRITES)
def test_a_foreign_origin_is_refused_even_signed_in(run_id: int, method: str, path: str,
                                                    body: Any) -> None:
    client, csrf = csrf_client(signed_in=True)
    before = snapshot(run_id)
    status = write(client, csrf, method, f"/api/runs/{run_id}{path}", body,
                   HTTP_ORIGIN="http://evil.example")
    assert status == 403
    assert snapshot(run_id) == before


def test_loopback_may_still_write_without_an_account(run_id: int) -> None:
    client = Client(enforce_csrf_checks=True, REMOTE_ADDR="127.0.0.1")
    client.get("/")
    csrf = client.cookies["csrftoken"].value
    assert write(client, csrf, "patch", f"/api/runs/{run_id}", {"notes": "mine"}) == 200
    assert Run.objects.get().notes == "mine"
