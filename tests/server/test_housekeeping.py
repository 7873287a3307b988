"""Run housekeeping through the API (docs/protocol.md "One run"): what a PATCH refuses and
why, that it changes nothing then, the live `run` messages pages get for an edit or a delete,
and that a DELETE leaves no row of the run in any table (run this file on SQLite and, with
DATABASE_URL, on PostgreSQL)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import orjson
import pytest
from channels.db import database_sync_to_async
from django.db import connection
from django.test import Client

from ingest.core import pointstore
from ingest.models import Project, Run
from ingest.pipeline.materialize import materialize_all
from ingest.write.frames import handle_object
from tests.server.conftest import Page, Trainer, step_msg

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def project() -> int:
    return Project.objects.create(name="proj").pk


def send(project: int, run: str = "r", **msg: Any) -> None:
    reply = handle_object(project, {"v": 1, "run": run, **msg}).reply
    assert reply["type"] == "ack", reply


def csrf_client() -> tuple[Client, dict[str, str]]:
    client = Client(enforce_csrf_checks=True)
    client.get("/")  # the page sets the CSRF cookie
    return client, {"HTTP_X_CSRFTOKEN": client.cookies["csrftoken"].value}


def patch(run_id: int, body: bytes | Any) -> Any:
    client, csrf = csrf_client()
    data = body if isinstance(body, bytes) else orjson.dumps(body)
    return client.patch(f"/api/runs/{run_id}", data, content_type="application/json", **csrf)


# ------------------------------------------------------------------ PATCH


@pytest.mark.parametrize(("body", "field"), [
    (b"not json", "body"),
    ([], "body"),
    ({}, "body"),
    ({"status": "finished"}, "status"),
    ({"name": ""}, "name"),
    ({"name": 7}, "name"),
    ({"name": "x" * 201}, "name"),
    ({"name": "a\nb"}, "name"),
    ({"name": "   "}, "name"),
    ({"name": "trailing "}, "name"),
    ({"name": "a//b"}, "name"),
    ({"notes": 5}, "notes"),
    ({"notes": "x" * 20_001}, "notes"),
    ({"notes": "a\x00b"}, "notes"),  # PostgreSQL text cannot hold NUL: it was a 500 there
    ({"color": "red"}, "color"),
    ({"color": "#abc"}, "color"),
    ({"color": "#12345g"}, "color"),
    ({"color": 0x123456}, "color"),
    ({"name": "fine", "color": "bad"}, "color"),  # one bad field: nothing is applied
])
def test_a_bad_patch_names_its_field_and_changes_nothing(project: int, body: Any,
                                                         field: str) -> None:
    send(project, id="0", type="step", step=0, metrics={"x": 1.0})
    run = Run.objects.get()
    res = patch(run.pk, body)
    assert res.status_code == 400, res.content
    assert orjson.loads(res.content)["field"] == field
    after = Run.objects.get()
    assert (after.name, after.notes, after.color) == (run.name, run.notes, run.color)


def test_a_patch_needs_the_csrf_token_and_an_existing_run(project: int) -> None:
    send(project, id="0", type="step", step=0, metrics={"x": 1.0})
    run = Run.objects.get()
    no_token = Client(enforce_csrf_checks=True).patch(
        f"/api/runs/{run.pk}", orjson.dumps({"name": "n"}), content_type="application/json")
    assert no_token.status_code == 403 and Run.objects.get().name == "r"
    assert patch(run.pk + 1000, {"name": "n"}).status_code == 404


def test_a_patch_changes_only_what_it_names_and_never_wakes_an_idle_run(
        project: int, settings: Any) -> None:
    settings.TELESCOPE_IDLE_SECONDS = 5
    send(project, id="s", type="run.start", config={"lr": 0.1})
    send(project, id="0", type="step", step=0, metrics={"x": 1.0})
    send(project, run="taken", id="1", type="step", step=0, metrics={"x": 1.0})
    run = Run.objects.get(name="r")
    Run.objects.filter(pk=run.pk).update(updated_at=run.updated_at - timedelta(minutes=5))
    res = patch(run.pk, {"notes": "**why** this run"})
    body = orjson.loads(res.content)
    assert res.status_code == 200
    assert (body["notes"], body["name"], body["color"], body["config"]) == (
        "**why** this run", "r", run.color, {"lr": 0.1})
    assert body["status"] == "idle"  # housekeeping is not a sign of life from the trainer
    clash = patch(run.pk, {"name": "taken", "notes": "lost"})
    assert clash.status_code == 409 and orjson.loads(clash.content)["field"] == "name"
    assert Run.objects.get(pk=run.pk).notes == "**why** this run"
    assert patch(run.pk, {"name": "renamed", "color": "#A1B2C3"}).status_code == 200
    after = Run.objects.get(pk=run.pk)
    assert (after.name, after.color, after.wire_name) == ("renamed", "#A1B2C3", "r")


# ------------------------------------------------------------------ live messages


async def next_run_message(page: Page) -> dict[str, Any]:
    while True:
        msg = await page.recv()
        if msg["type"] == "run":
            return msg


async def test_pages_hear_of_a_rename_and_of_a_delete(trainer: Trainer, page: Page) -> None:
    await trainer.send(step_msg(0, {"loss": 1.0}))
    run_id = await database_sync_to_async(lambda: Run.objects.get(name="r").pk)()
    await page.send(type="subscribe", run=run_id, after_seq=0)
    await page.recv_delta()
    res = await database_sync_to_async(patch)(run_id, {"name": "renamed", "notes": "n"})
    assert res.status_code == 200
    msg = await next_run_message(page)
    assert msg["run"] == run_id
    assert (msg["info"]["name"], msg["info"]["notes"], msg["info"]["status"]) == (
        "renamed", "n", "running")
    client, csrf = await database_sync_to_async(csrf_client)()
    res = await database_sync_to_async(client.delete)(f"/api/runs/{run_id}", **csrf)
    assert res.status_code == 200
    msg = await next_run_message(page)
    info = msg["info"]
    assert {k: info[k] for k in ("id", "deleted", "project", "name")} == {
        "id": run_id, "deleted": True, "project": "proj", "name": "renamed"}


# ------------------------------------------------------------------ DELETE


def run_rows(run_id: int) -> dict[str, int]:
    """Rows of every table that belong to the run, found from the database itself (not the
    models): a `run_id` column, or a foreign key to rows that belong to it, transitively."""
    intro = connection.introspection
    qn = connection.ops.quote_name
    with connection.cursor() as cur:
        tables = intro.table_names(cur)
        columns = {t: {c.name for c in intro.get_table_description(cur, t)} for t in tables}
        relations = {t: intro.get_relations(cur, t) for t in tables}
        pks = {t: intro.get_primary_key_column(cur, t) for t in tables}
        cur.execute("SELECT id FROM ingest_run WHERE id = %s", [run_id])
        owned: dict[str, set[Any]] = {"ingest_run": {row[0] for row in cur.fetchall()}}
        while True:
            grew = False
            for t in tables:
                conds = [(col, sorted(owned[ref_table])) for col, (_, ref_table)
                         in relations[t].items() if owned.get(ref_table)]
                if "run_id" in columns[t] and t != "ingest_run":  # with or without a constraint
                    conds.append(("run_id", [run_id]))
                keys: set[Any] = set()
                for col, ids in conds:
                    marks = ", ".join(["%s"] * len(ids))
                    cur.execute(f"SELECT {qn(pks[t] or col)} FROM {qn(t)} WHERE {qn(col)} IN "
                                f"({marks})", ids)
                    keys |= {row[0] for row in cur.fetchall()}
                if keys - owned.get(t, set()):
                    owned[t] = owned.get(t, set()) | keys
                    grew = True
            if not grew:
                return {t: len(v) for t, v in owned.items() if v}


def fill(project: int, run: str) -> int:
    """A run with a row in every kind of table: incarnation, config, environments, steps with a
    categorical key, samples with an observed range, aggregates, a series snapshot."""
    send(project, run=run, id=f"{run}-s", type="run.start", incarnation=f"{run}-inc",
         config={"lr": 1e-6}, environments=[{"name": "countdown", "reward_min": 0,
                                              "reward_max": 1}])
    for step in range(3):
        send(project, run=run, id=f"{run}-{step}", type="step", step=step,
             metrics={"loss": 1.0 / (step + 1), "optim/outcome": "applied"})
        send(project, run=run, id=f"{run}-x{step}", type="samples", step=step, env="math",
             sample_id=[f"{step}-{i}" for i in range(4)], group_id=[0, 0, 1, 1],
             reward=[0.0, 1.0, 0.5, 0.5], metrics={"correct": [0, 1, 1, 1]},
             prompt=["2+2?"] * 4, completion=["4", "5", None, "four"])
    run_id = Run.objects.get(project_id=project, name=run).pk
    materialize_all(run_id)
    return run_id


def test_delete_leaves_no_row_of_the_run_and_every_row_of_the_others(
        project: int) -> None:
    doomed, kept = fill(project, "doomed"), fill(project, "kept")
    assert pointstore.compact(doomed, min_points=1) > 0  # chunks as well as blocks
    before, kept_before = run_rows(doomed), run_rows(kept)
    # The run really had rows everywhere this test claims to look.
    assert {"ingest_run", "ingest_series", "ingest_pointblock", "ingest_serieschunk",
            "ingest_seriescategory", "ingest_samplebatch", "ingest_stepstate",
            "ingest_ingestedmessage", "ingest_environment", "ingest_observedrange",
            "ingest_runincarnation"} <= set(before), before
    client, csrf = csrf_client()
    res = client.delete(f"/api/runs/{doomed}", **csrf)
    assert res.status_code == 200 and orjson.loads(res.content) == {"deleted": doomed}
    assert run_rows(doomed) == {}
    assert run_rows(kept) == kept_before
    assert client.delete(f"/api/runs/{doomed}", **csrf).status_code == 404
    assert Client().get(f"/api/runs/{doomed}").status_code == 404
    # The trainer of the deleted run starts afresh under its name; the other run is intact.
    send(project, run="doomed", id="again", type="step", step=0, metrics={"loss": 2.0})
    assert Run.objects.get(name="doomed").last_step == 0
    assert Run.objects.get(pk=kept).last_step == 2


def test_delete_needs_the_csrf_token(project: int) -> None:
    send(project, id="0", type="step", step=0, metrics={"x": 1.0})
    run_id = Run.objects.get().pk
    assert Client(enforce_csrf_checks=True).delete(f"/api/runs/{run_id}").status_code == 403
    assert Run.objects.filter(pk=run_id).exists()


def test_delete_of_a_run_whose_steps_await_aggregation(project: int) -> None:
    send(project, id="0", type="samples", step=0, sample_id=[1, 2], group_id=[0, 0],
         reward=[0.0, 1.0])
    run_id = Run.objects.get().pk
    assert "ingest_stepstate" in run_rows(run_id)  # dirty, not yet aggregated
    client, csrf = csrf_client()
    assert client.delete(f"/api/runs/{run_id}", **csrf).status_code == 200
    assert run_rows(run_id) == {}
    materialize_all()  # the pipeline finds nothing left of it to do
    assert run_rows(run_id) == {}
