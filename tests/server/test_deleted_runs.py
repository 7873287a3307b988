"""A deleted run: the delete leaves a tombstone in its own transaction, the run's old
URLs answer a page saying it was deleted (and an id that never was gets a page too), the JSON
API's 404s stay JSON, and live pages hear of the deletion — from the broadcast, from the
database when no broadcast reaches them (another process, a layer that is out), and when they
subscribe afterwards."""

from __future__ import annotations

import re
import time
from datetime import timedelta
from typing import Any

import orjson
import pytest
from channels.db import database_sync_to_async
from django.test import Client

from ingest.core.payloads import now
from ingest.models import DeletedRun, Project, Run
from ingest.write import housekeeping
from ingest.write.frames import handle_object
from tests.server.conftest import Page, Trainer, step_msg

pytestmark = pytest.mark.django_db(transaction=True)

HOSTILE = "grpo <img src=x onerror=alert(1)>"


@pytest.fixture
def project() -> int:
    return Project.objects.create(name="proj").pk


def make_run(project: int, name: str = "r", steps: int = 2) -> int:
    for n in range(steps):
        reply = handle_object(project, {"v": 1, "run": name, "id": f"{name}-{n}", "type": "step",
                                        "step": n, "metrics": {"loss": 1.0}}).reply
        assert reply["type"] == "ack", reply
    return Run.objects.get(project_id=project, name=name).pk


def csrf_delete(run_id: int) -> Any:
    client = Client(enforce_csrf_checks=True)
    client.get("/")
    return client.delete(f"/api/runs/{run_id}",
                         HTTP_X_CSRFTOKEN=client.cookies["csrftoken"].value)


# ------------------------------------------------------------------ the tombstone


def test_a_delete_records_the_run_s_tombstone(project: int) -> None:
    run_id = make_run(project, "doomed")
    before = now()
    assert csrf_delete(run_id).status_code == 200
    tomb = DeletedRun.objects.get(pk=run_id)
    assert (tomb.project_id, tomb.name) == (project, "doomed")
    assert before <= tomb.deleted_at <= now()
    assert not Run.objects.filter(pk=run_id).exists()
    assert housekeeping.deleted_info(run_id) == {
        "id": run_id, "deleted": True, "project": "proj", "name": "doomed",
        "deleted_at": tomb.deleted_at.isoformat()}
    assert housekeeping.deleted_info(run_id + 1000) is None


def test_the_tombstone_and_the_delete_commit_together(project: int, monkeypatch: Any) -> None:
    run_id = make_run(project)

    def fail(**_: Any) -> None:
        raise RuntimeError("tombstone not written")

    monkeypatch.setattr(DeletedRun.objects, "update_or_create", fail)
    with pytest.raises(RuntimeError):
        housekeeping.delete(run_id)
    assert Run.objects.get(pk=run_id).last_step == 1  # nothing of the run went
    assert not DeletedRun.objects.exists()


# ------------------------------------------------------------------ old URLs


def test_old_urls_of_a_deleted_run_answer_a_page_saying_so(project: int) -> None:
    run_id = make_run(project, HOSTILE)
    assert csrf_delete(run_id).status_code == 200
    for path in (f"/runs/{run_id}", f"/runs/{run_id}/metrics",
                 f"/runs/{run_id}/metrics?view=custom", f"/runs/{run_id}/samples?step=1",
                 f"/runs/{run_id}/timeline"):
        res = Client().get(path)
        html = res.content.decode()
        assert res.status_code == 404, path
        assert res["Content-Type"].startswith("text/html"), path
        assert "This run was deleted" in html, path
        assert "grpo &lt;img src=x onerror=alert(1)&gt;" in html and "<img src=x" not in html
        assert "of project proj" in html
        assert re.search(r'<a class="button-link" href="/">Back to the run list</a>', html), path
        assert re.search(r"/static/css/app\.[0-9a-f]{12}\.css", html)  # the site's style
        assert 'datetime="' in html


def test_the_deleted_page_links_the_run_that_has_its_name_now(project: int) -> None:
    old = make_run(project, "grpo-live")
    assert csrf_delete(old).status_code == 200
    assert "A newer run" not in Client().get(f"/runs/{old}").content.decode()
    new = make_run(project, "grpo-live")  # the live demo's next cycle
    assert new != old
    html = Client().get(f"/runs/{old}/metrics").content.decode()
    assert f'href="/runs/{new}"' in html


def test_an_id_that_never_existed_gets_a_friendly_page(project: int) -> None:
    for path in ("/runs/999999", "/runs/999999/metrics", "/runs/999999/samples"):
        res = Client().get(path)
        html = res.content.decode()
        assert res.status_code == 404 and "No run 999999" in html, path
        assert 'href="/"' in html and "deleted" not in html
    res = Client().get("/no/such/page")
    assert res.status_code == 404 and 'href="/"' in res.content.decode()


def test_api_404s_stay_json(project: int) -> None:
    run_id = make_run(project)
    assert csrf_delete(run_id).status_code == 200
    tomb = DeletedRun.objects.get(pk=run_id)
    for path in (f"/api/runs/{run_id}", f"/api/runs/{run_id}/catalog",
                 f"/api/runs/{run_id}/layout"):
        res = Client().get(path)
        assert res.status_code == 404 and res["Content-Type"] == "application/json", path
        assert orjson.loads(res.content) == {"error": f"run {run_id} was deleted",
                                             "deleted_at": tomb.deleted_at.isoformat()}, path
    for path in (f"/api/runs/{run_id}/samples", f"/api/runs/{run_id}/series?ids=x"):
        res = Client().get(path)
        assert res.status_code == 404 and res["Content-Type"] == "application/json", path
    res = Client().get("/api/runs/999999")
    assert res.status_code == 404 and orjson.loads(res.content) == {"error": "no run 999999"}
    res = Client().get("/api/nothing-here")
    assert res.status_code == 404 and orjson.loads(res.content) == {"error": "not found"}
    assert csrf_delete(run_id).status_code == 404  # a second delete: nothing to delete


# ------------------------------------------------------------------ live pages


async def run_message(page: Page, timeout: float = 10) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        msg = await page.recv()
        if msg["type"] in ("run", "error"):
            return msg
    raise AssertionError("no run message")


async def test_a_page_hears_of_the_delete_with_the_run_s_name(trainer: Trainer,
                                                               page: Page) -> None:
    await trainer.send(step_msg(0, {"loss": 1.0}))
    run_id = await database_sync_to_async(lambda: Run.objects.get(name="r").pk)()
    await page.send(type="subscribe", run=run_id, after_seq=0)
    await page.recv_delta()
    res = await database_sync_to_async(csrf_delete)(run_id)
    assert res.status_code == 200
    msg = await run_message(page)
    assert msg["run"] == run_id and msg["info"]["deleted"] is True
    assert (msg["info"]["name"], msg["info"]["project"]) == ("r", "proj")
    assert msg["info"]["deleted_at"]


async def test_a_delete_no_broadcast_announced_reaches_the_page_from_the_database(
        trainer: Trainer, page: Page, monkeypatch: Any) -> None:
    """As when another server process deletes the run on the in-memory layer, or the layer is
    out: no `run` event reaches this process; its watch finds the row gone."""
    await trainer.send(step_msg(0, {"loss": 1.0}))
    run_id = await database_sync_to_async(lambda: Run.objects.get(name="r").pk)()
    await page.send(type="subscribe", run=run_id, after_seq=0)
    await page.recv_delta()
    monkeypatch.setattr(housekeeping, "announce", lambda *a, **k: None)
    assert await database_sync_to_async(housekeeping.delete)(run_id)
    start = time.monotonic()
    msg = await run_message(page)
    assert msg["info"]["deleted"] is True and msg["info"]["name"] == "r"
    assert time.monotonic() - start < 5


async def test_a_subscription_to_a_deleted_run_is_told_it_was_deleted(
        trainer: Trainer, page: Page) -> None:
    await trainer.send(step_msg(0, {"loss": 1.0}))
    run_id = await database_sync_to_async(lambda: Run.objects.get(name="r").pk)()
    assert await database_sync_to_async(housekeeping.delete)(run_id)
    await page.send(type="subscribe", run=run_id, after_seq=0)  # a page that reconnects
    msg = await run_message(page)
    assert msg["type"] == "run" and msg["info"]["deleted"] is True
    await page.send(type="subscribe", run=run_id + 1000, after_seq=0)  # never was: no lie
    msg = await run_message(page)
    assert msg == {"type": "error", "run": run_id + 1000, "message": "no such run"}


def test_an_old_tombstone_does_not_hide_a_run(project: int) -> None:
    """Ids are never reused (AUTOINCREMENT, sequences); were one ever, the run wins."""
    run_id = make_run(project)
    DeletedRun.objects.create(id=run_id, project_id=project, name="old",
                              deleted_at=now() - timedelta(days=1))
    assert Client().get(f"/runs/{run_id}").status_code == 200
    assert Client().get(f"/api/runs/{run_id}").status_code == 200
