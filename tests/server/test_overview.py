"""The run overview page (`/runs/<id>`) and what it shows of a run: statuses (idle after a
quiet spell, with a short idle setting), progress and ETA arithmetic (ingest/core/progress.py), and
the demo command leaving its run finished."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from io import StringIO
from types import SimpleNamespace
from typing import Any

import orjson
import pytest
from django.core.management import call_command
from django.test import Client

from ingest.core import progress
from ingest.models import Project, Run
from ingest.write.frames import handle_object

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def project() -> int:
    return Project.objects.create(name="proj").pk


def send(project: int, run: str = "r", **msg: Any) -> dict[str, Any]:
    reply = handle_object(project, {"v": 1, "run": run, **msg}).reply
    assert reply["type"] == "ack", reply
    return reply


def embedded(html: str, element_id: str) -> Any:
    """The JSON a page carries in <script id=... type="application/json">."""
    start = html.index(f'id="{element_id}"')
    body = html[html.index(">", start) + 1:html.index("</script>", start)]
    return json.loads(body)


def api_run(run_id: int) -> dict[str, Any]:
    return orjson.loads(Client().get(f"/api/runs/{run_id}").content)  # type: ignore[no-any-return]


# ------------------------------------------------------------------ the page


def test_the_overview_carries_the_runs_info_config_and_environments(project: int) -> None:
    send(project, id="s", type="run.start", config={"lr": 1e-6, "optim": {"name": "adamw"}},
         total_steps=10, environments=[{"name": "countdown", "reward_min": 0, "reward_max": 2}])
    send(project, id="0", type="step", step=0, time=100.0, metrics={"loss": 1.0})
    run_id = Run.objects.get().pk
    res = Client().get(f"/runs/{run_id}")
    assert res.status_code == 200
    html = res.content.decode()
    info = embedded(html, "run-info")
    assert (info["name"], info["status"], info["total_steps"], info["last_step"]) == (
        "r", "running", 10, 0)
    assert info["config"] == {"lr": 1e-6, "optim": {"name": "adamw"}}
    catalog = embedded(html, "run-catalog")
    assert [e["name"] for e in catalog["environments"]] == ["countdown"]
    assert {e["key"] for e in catalog["series"]} == {"loss"}
    assert "csrftoken" in res.cookies  # the housekeeping controls write with it
    assert f'href="/runs/{run_id}/metrics"' in html
    # Its own style sheet and module, under their content-hashed names (ServeStatic).
    assert re.search(r"/static/css/overview\.[0-9a-f]{12}\.css", html)
    assert re.search(r"/static/js/overview\.[0-9a-f]{12}\.js", html)


def test_the_overview_of_an_unknown_run_is_404_and_a_hostile_name_stays_text(
        project: int) -> None:
    assert Client().get("/runs/999999").status_code == 404
    hostile = "</script><img src=x onerror=alert(1)>"
    send(project, run=hostile, id="0", type="step", step=0, metrics={"x": 1.0})
    html = Client().get(f"/runs/{Run.objects.get().pk}").content.decode()
    assert "<img src=x" not in html
    assert embedded(html, "run-info")["name"] == hostile


def test_the_overview_needs_read_access_like_every_page(project: int) -> None:
    send(project, id="0", type="step", step=0, metrics={"x": 1.0})
    res = Client(REMOTE_ADDR="203.0.113.9").get(f"/runs/{Run.objects.get().pk}")
    assert res.status_code == 302 and "/accounts/login/" in res["Location"]


# ------------------------------------------------------------------ statuses


def test_status_turns_idle_after_the_idle_setting_and_back_on_a_message(
        project: int, settings: Any) -> None:
    settings.TELESCOPE_IDLE_SECONDS = 5
    send(project, id="0", type="step", step=0, metrics={"x": 1.0})
    run = Run.objects.get()
    assert api_run(run.pk)["status"] == "running"
    Run.objects.update(updated_at=run.updated_at - timedelta(seconds=30))
    assert api_run(run.pk)["status"] == "idle"
    assert embedded(Client().get(f"/runs/{run.pk}").content.decode(), "run-info")[
        "status"] == "idle"
    send(project, id="1", type="step", step=1, metrics={"x": 1.0})  # the trainer is back
    assert api_run(run.pk)["status"] == "running"
    Run.objects.update(updated_at=run.updated_at - timedelta(seconds=30))
    send(project, id="end", type="run.end", status="failed")
    assert api_run(run.pk)["status"] == "failed"  # an ended run is never idle


def test_status_of_compares_the_quiet_spell_with_the_setting(settings: Any) -> None:
    settings.TELESCOPE_IDLE_SECONDS, settings.TELESCOPE_CRASH_SECONDS = 60, 600
    t = datetime(2026, 1, 1, tzinfo=UTC)
    alive = (t + timedelta(seconds=61)).timestamp()  # a heartbeat just now
    assert progress.status_of("running", t, alive, t + timedelta(seconds=60)) == "running"
    assert progress.status_of("running", t, alive, t + timedelta(seconds=61)) == "idle"
    assert progress.status_of("finished", t, None, t + timedelta(days=9)) == "finished"
    assert progress.status_of("failed", t, None, t + timedelta(days=9)) == "failed"


def test_status_of_a_run_not_alive_for_the_crash_setting_is_crashed(settings: Any) -> None:
    settings.TELESCOPE_IDLE_SECONDS, settings.TELESCOPE_CRASH_SECONDS = 600, 120
    t = datetime(2026, 1, 1, tzinfo=UTC)
    seen = t.timestamp()
    assert progress.status_of("running", t, seen, t + timedelta(seconds=120)) == "running"
    assert progress.status_of("running", t, seen, t + timedelta(seconds=121)) == "crashed"
    # not alive beats silent: a dead trainer is crashed, never idle
    assert progress.status_of("running", t, seen, t + timedelta(days=1)) == "crashed"
    # a run from before liveness was recorded: judged by its last data
    assert progress.status_of("running", t, None, t + timedelta(seconds=121)) == "crashed"
    assert progress.status_of("finished", t, seen, t + timedelta(days=1)) == "finished"


def test_a_crashed_run_has_no_eta_and_its_next_message_makes_it_running(
        project: int, settings: Any) -> None:
    settings.TELESCOPE_CRASH_SECONDS = 120
    send(project, id="s", type="run.start", total_steps=10)
    for step in range(3):
        send(project, id=f"{step}", type="step", step=step, time=500.0 + step,
             metrics={"x": 1.0})
    run = Run.objects.get()
    assert api_run(run.pk)["eta_seconds"] is not None
    Run.objects.update(last_seen=run.last_seen - 121)
    info = api_run(run.pk)
    assert (info["status"], info["eta_seconds"]) == ("crashed", None)
    send(project, id="3", type="step", step=3, time=503.0, metrics={"x": 1.0})
    assert api_run(run.pk)["status"] == "running"


def test_steps_counted_from_one_are_all_done_at_the_last(project: int) -> None:
    send(project, id="s", type="run.start", total_steps=24)
    for step in range(1, 25):  # the Hugging Face Trainer's global_step: 1..24
        send(project, id=f"{step}", type="step", step=step, time=500.0 + step,
             metrics={"x": 1.0})
    info = api_run(Run.objects.get().pk)
    assert (info["first_step"], info["last_step"], info["steps_done"]) == (1, 24, 24)
    assert info["eta_seconds"] == 0


# ------------------------------------------------------------------ ETA arithmetic


def fake_run() -> SimpleNamespace:
    return SimpleNamespace(last_step=None, last_step_time=None, step_seconds=None)


def test_seconds_per_step_is_an_ewma_of_gaps_per_step_skipping_the_first() -> None:
    run = fake_run()
    for step, t in [(0, 1000.0), (1, 1010.0), (3, 1050.0), (4, 1060.0)]:
        progress.advance(run, step, t)
        run.last_step = step
    # gaps per step: 10 (seed), 20 (40 s over 2 steps), 10; step 0's start-up is not a gap
    want = progress.ALPHA * 10 + (1 - progress.ALPHA) * (
        progress.ALPHA * 20 + (1 - progress.ALPHA) * 10)
    assert run.step_seconds == pytest.approx(want)
    before = run.step_seconds
    for step, t in [(2, 2000.0), (4, 3000.0), (5, None)]:  # old, repeated, untimed
        progress.advance(run, step, t)
    assert run.step_seconds == before and run.last_step_time == 1060.0


def test_steps_done_count_from_zero_unless_the_first_step_is_one_or_more() -> None:
    assert progress.steps_done(0, 23) == 24
    assert progress.steps_done(1, 24) == 24
    assert progress.steps_done(None, None) is None


def test_eta_is_steps_left_times_seconds_per_step_while_running() -> None:
    assert progress.eta_seconds("running", 100, 50, 2.0) == 100.0  # 50 done, 50 left
    assert progress.eta_seconds("running", 100, 100, 2.0) == 0
    assert progress.eta_seconds("running", 100, 150, 2.0) == 0  # past the total: never < 0
    for args in [("finished", 100, 50, 2.0), ("idle", 100, 50, 2.0), ("crashed", 100, 50, 2.0),
                 ("running", None, 50, 2.0), ("running", 100, None, 2.0),
                 ("running", 100, 50, None)]:
        assert progress.eta_seconds(*args) is None, args


def test_total_steps_comes_from_config_max_steps_and_the_api_counts_down(project: int) -> None:
    send(project, id="s", type="run.start", config={"max_steps": 20})
    for step in range(4):
        send(project, id=f"{step}", type="step", step=step, time=500.0 + 3 * step,
             metrics={"x": 1.0})
    info = api_run(Run.objects.get().pk)
    assert info["total_steps"] == 20
    assert info["eta_seconds"] == pytest.approx((20 - 1 - 3) * 3.0)


# ------------------------------------------------------------------ the demo command


def test_the_demo_command_leaves_its_run_finished_with_its_progress() -> None:
    call_command("demo", "--steps", "6", stdout=StringIO())
    run = Run.objects.get(name="grpo-demo")
    info = api_run(run.pk)
    assert (info["status"], info["last_step"], info["total_steps"], info["eta_seconds"]) == (
        "finished", 5, 6, None)
    call_command("demo", "--if-empty", stdout=StringIO())  # nothing more when runs exist
    assert Run.objects.count() == 1
