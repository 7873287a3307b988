"""Runs as the read API tells them: status (idle after a quiet spell), progress and ETA,
colours distinct within a project; and housekeeping: rename, notes, colour, delete."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import orjson
import pytest
from django.test import Client

from ingest.core.progress import ALPHA
from ingest.models import PointBlock, Project, Run, SampleBatch, Series, SeriesChunk
from ingest.write.frames import handle_object

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def project() -> int:
    return Project.objects.create(name="proj").pk


def send(project: int, **msg: Any) -> dict[str, Any]:
    return handle_object(project, {"v": 1, "run": "r", **msg}).reply


def run_json(client: Client | None = None) -> dict[str, Any]:
    [run] = orjson.loads((client or Client()).get("/api/runs").content)["runs"]
    return run  # type: ignore[no-any-return]


def test_progress_and_eta_come_from_recent_step_gaps(project: int) -> None:
    send(project, id="s", type="run.start", config={"max_steps": 100}, time=1000.0)
    times = [1300.0, 1310.0, 1320.0, 1330.0, 1350.0]  # step 0 took 300 s of warm-up
    for step, t in enumerate(times):
        send(project, id=f"{step}", type="step", step=step, time=t, metrics={"loss": 1.0})
    want = 10.0  # the first gap seeds the mean; step 0's 300 s never enter it
    for gap in (10.0, 10.0, 20.0):
        want = ALPHA * gap + (1 - ALPHA) * want
    run = run_json()
    assert run["total_steps"] == 100 and run["status"] == "running"
    assert run["eta_seconds"] == pytest.approx((100 - 1 - 4) * want)


def test_a_quiet_running_run_is_idle_and_an_ended_one_says_so(project: int,
                                                              settings: Any) -> None:
    send(project, id="a", type="step", step=0, metrics={"x": 1.0})
    Run.objects.update(updated_at=Run.objects.get().updated_at - timedelta(seconds=700))
    assert run_json()["status"] == "idle" and run_json()["eta_seconds"] is None
    settings.TELESCOPE_IDLE_SECONDS = 3600
    assert run_json()["status"] == "running"
    send(project, id="e", type="run.end", status="finished")
    assert run_json()["status"] == "finished"


def test_runs_of_a_project_get_distinct_colours(project: int) -> None:
    for i in range(5):
        handle_object(project, {"v": 1, "id": "x", "type": "step", "run": f"r{i}", "step": 0,
                                "metrics": {"x": 1.0}})
    colours = [r.color for r in Run.objects.order_by("id")]
    assert len(set(colours)) == 5 and all(c.startswith("#") and len(c) == 7 for c in colours)


def test_rename_annotate_recolour_and_delete(project: int) -> None:
    send(project, id="a", type="step", step=0, metrics={"x": 1.0})
    send(project, id="b", type="samples", step=0, sample_id=[1, 2], group_id=[0, 0],
         reward=[0.0, 1.0])
    handle_object(project, {"v": 1, "id": "c", "type": "step", "run": "other", "step": 0,
                            "metrics": {"x": 1.0}})
    rid = Run.objects.get(name="r").pk
    client = Client(enforce_csrf_checks=True)
    client.get("/")  # the CSRF cookie, as the page gets it
    csrf = {"HTTP_X_CSRFTOKEN": client.cookies["csrftoken"].value}

    def patch(body: Any) -> Any:
        return client.patch(f"/api/runs/{rid}", orjson.dumps(body),
                            content_type="application/json", **csrf)

    assert client.patch(f"/api/runs/{rid}", b"{}", content_type="application/json"
                        ).status_code == 403  # no CSRF token
    done = patch({"name": "baseline", "notes": "**lr** 1e-6", "color": "#123456"})
    assert done.status_code == 200
    assert {k: orjson.loads(done.content)[k] for k in ("name", "notes", "color")} == {
        "name": "baseline", "notes": "**lr** 1e-6", "color": "#123456"}
    taken = patch({"name": "other"})
    assert taken.status_code == 409 and orjson.loads(taken.content)["field"] == "name"
    assert orjson.loads(patch({"color": "red"}).content)["field"] == "color"
    assert orjson.loads(patch({"status": "x"}).content)["field"] == "status"
    # a trainer still addressing the old name reaches the renamed run
    send(project, id="d", type="step", step=1, metrics={"x": 2.0})
    assert Run.objects.get(pk=rid).last_step == 1
    assert client.delete(f"/api/runs/{rid}", **csrf).status_code == 200
    assert not Run.objects.filter(pk=rid).exists()
    assert not Series.objects.filter(run_id=rid).exists()
    assert not PointBlock.objects.filter(run_id=rid).exists()
    assert not SeriesChunk.objects.filter(series__run_id=rid).exists()
    assert not SampleBatch.objects.filter(run_id=rid).exists()
    assert Run.objects.filter(name="other").exists()
    assert client.delete(f"/api/runs/{rid}", **csrf).status_code == 404
