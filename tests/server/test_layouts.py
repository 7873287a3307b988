"""The Custom view's layout API: one layout per project, validated field by field, CSRF-protected,
and served with the page."""

from __future__ import annotations

import io
from typing import Any

import orjson
import pytest
from django.core.management import call_command
from django.test import Client

from ingest.models import Project
from ingest.service import handle_object
from telescope_ui.layouts import clean_layout

pytestmark = pytest.mark.django_db


def make_run(project: str, run: str) -> int:
    pk = Project.objects.get_or_create(name=project)[0].pk
    msg = {"v": 1, "id": f"{run}-0", "type": "step", "run": run, "step": 0,
           "metrics": {"entropy": 1.0}}
    assert handle_object(pk, msg).reply["type"] == "ack"
    return next(r["id"] for r in Client().get("/api/runs").json()["runs"] if r["name"] == run)


def page_client(run_id: int) -> tuple[Client, dict[str, str]]:
    """A client that enforces CSRF, with the token the Metrics page hands out."""
    client = Client(enforce_csrf_checks=True)
    client.get(f"/runs/{run_id}/metrics?view=custom")
    return client, {"X-CSRFToken": client.cookies["csrftoken"].value}


def put(client: Client, run_id: int, body: Any, headers: dict[str, str]) -> Any:
    return client.put(f"/api/runs/{run_id}/layout", orjson.dumps(body),
                      content_type="application/json", headers=headers)


GOOD = {"charts": [
    {"id": "step|entropy||", "wide": True, "settings": {"logY": True, "yMax": 2.5}},
    {"id": "reward|reward|mean|countdown"},
]}


def test_a_layout_is_saved_per_project_and_shared_by_its_runs() -> None:
    a1, a2, b1 = make_run("a", "a1"), make_run("a", "a2"), make_run("b", "b1")
    client, headers = page_client(a1)
    assert client.get(f"/api/runs/{a1}/layout").json() == {
        "project": "a", "name": "default", "names": [], "charts": [], "updated_at": None}
    saved = put(client, a1, GOOD, headers)
    assert saved.status_code == 200, saved.content
    want = [{"id": "step|entropy||", "wide": True, "settings": {"logY": True, "yMax": 2.5}},
            {"id": "reward|reward|mean|countdown", "wide": False, "settings": {}}]
    assert saved.json()["charts"] == want
    assert client.get(f"/api/runs/{a2}/layout").json()["charts"] == want  # same project
    assert client.get(f"/api/runs/{b1}/layout").json()["charts"] == []  # another project
    page = client.get(f"/runs/{a2}/metrics?view=custom").content.decode()
    assert 'id="run-layout"' in page and "step|entropy||" in page
    assert 'id="run-layout"' not in client.get(f"/runs/{a2}/metrics").content.decode()
    put(client, a2, {"charts": want[1:]}, headers)  # replaced whole
    assert client.get(f"/api/runs/{a1}/layout").json()["charts"] == want[1:]


@pytest.mark.parametrize(("body", "field"), [
    ([], "body"),
    ({"charts": {}}, "charts"),
    ({"charts": ["x"]}, "charts[0]"),
    ({"charts": [{"id": ""}]}, "charts[0].id"),
    ({"charts": [{"id": 5}]}, "charts[0].id"),
    ({"charts": [{"id": "a"}, {"id": "a"}]}, "charts[1].id"),
    ({"charts": [{"id": "a", "wide": 1}]}, "charts[0].wide"),
    ({"charts": [{"id": "a", "colour": "red"}]}, "charts[0].colour"),
    ({"charts": [{"id": "a", "settings": []}]}, "charts[0].settings"),
    ({"charts": [{"id": "a", "settings": {"logY": "yes"}}]}, "charts[0].settings.logY"),
    ({"charts": [{"id": "a", "settings": {"yMin": "0"}}]}, "charts[0].settings.yMin"),
    ({"charts": [{"id": "a", "settings": {"zoom": 2}}]}, "charts[0].settings.zoom"),
    ({"charts": [{"id": f"s{i}"} for i in range(301)]}, "charts"),
    ({"charts": [], "base": 5}, "base"),
])
def test_a_bad_layout_is_refused_naming_the_field(body: Any, field: str) -> None:
    run_id = make_run("a", "a1")
    client, headers = page_client(run_id)
    put(client, run_id, GOOD, headers)
    resp = put(client, run_id, body, headers)
    assert resp.status_code == 400 and resp.json()["field"] == field, resp.content
    assert len(client.get(f"/api/runs/{run_id}/layout").json()["charts"]) == 2  # untouched


def test_saving_needs_the_csrf_token_and_a_real_run() -> None:
    run_id = make_run("a", "a1")
    client, headers = page_client(run_id)
    assert put(client, run_id, GOOD, {}).status_code == 403
    assert put(client, run_id + 999, GOOD, headers).status_code == 404
    bad_json = client.put(f"/api/runs/{run_id}/layout", b"{", content_type="application/json",
                          headers=headers)
    assert bad_json.status_code == 400 and bad_json.json()["field"] == "body"
    assert client.post(f"/api/runs/{run_id}/layout", {}, headers=headers).status_code == 405


def test_the_demo_gives_its_project_a_starter_dashboard_of_existing_charts() -> None:
    call_command("demo", "--steps", "6", stdout=io.StringIO())
    run_id = next(r["id"] for r in Client().get("/api/runs").json()["runs"])
    layout = Client().get(f"/api/runs/{run_id}/layout").json()
    catalog = {e["id"] for e in Client().get(f"/api/runs/{run_id}/catalog").json()["series"]}
    ids = [c["id"] for c in layout["charts"]]
    assert layout["project"] == "demo" and len(ids) == 7
    assert set(ids) <= catalog, set(ids) - catalog
    call_command("demo", "--if-empty", stdout=io.StringIO())  # a second call changes nothing
    assert len(Client().get("/api/runs").json()["runs"]) == 1


def test_a_save_based_on_a_stale_layout_is_refused_with_the_current_one() -> None:
    run_id = make_run("a", "a1")
    client, headers = page_client(run_id)
    first = put(client, run_id, {"charts": [], "base": None}, headers)  # nothing stored yet
    assert first.status_code == 200
    loaded = first.json()["updated_at"]
    other = put(client, run_id, {**GOOD, "base": loaded}, headers)  # another page saves
    assert other.status_code == 200
    stale = put(client, run_id, {"charts": [{"id": "x"}], "base": loaded}, headers)
    assert stale.status_code == 409 and stale.json()["field"] == "base"
    assert [c["id"] for c in stale.json()["layout"]["charts"]] == [c["id"] for c in GOOD["charts"]]
    again = put(client, run_id, {"charts": [{"id": "x"}], "base": other.json()["updated_at"]},
                headers)
    assert again.status_code == 200 and again.json()["charts"][0]["id"] == "x"
    assert put(client, run_id, {"charts": []}, headers).status_code == 200  # no base: no check


def test_a_project_has_named_dashboards_to_create_rename_and_delete() -> None:
    run_id = make_run("a", "a1")
    client, headers = page_client(run_id)
    url = f"/api/runs/{run_id}/layout"

    def send(method: str, name: str, body: Any = None) -> Any:
        return getattr(client, method)(f"{url}?name={name}", orjson.dumps(body),
                                       content_type="application/json", headers=headers)

    assert send("put", "default", GOOD).status_code == 200
    perf = send("put", "perf", {"charts": [{"id": "step|timing_step_total||"}], "base": None})
    assert perf.status_code == 200 and perf.json()["names"] == ["default", "perf"]
    assert send("put", "perf", {"charts": [], "base": None}).status_code == 409  # exists
    page = client.get(f"/runs/{run_id}/metrics?view=custom&dashboard=perf").content.decode()
    assert "timing_step_total" in page and '"name": "perf"' in page
    assert '"name": "default"' in client.get(
        f"/runs/{run_id}/metrics?view=custom&dashboard=%01bad").content.decode()

    renamed = send("patch", "perf", {"name": " Perf & timing "})
    assert renamed.status_code == 200 and renamed.json()["name"] == "Perf & timing"
    assert renamed.json()["names"] == ["default", "Perf & timing"]
    assert send("patch", "Perf & timing", {"name": "default"}).status_code == 409
    assert send("patch", "nothing", {"name": "x"}).status_code == 404
    bad = send("patch", "Perf & timing", {"name": "x" * 101})
    assert bad.status_code == 400 and bad.json()["field"] == "name"
    assert client.get(f"{url}?name=%00").json()["field"] == "name"

    gone = client.delete(f"{url}?name=Perf%20%26%20timing", headers=headers)
    assert gone.status_code == 200 and gone.json()["names"] == ["default"]
    assert gone.json()["charts"] == clean_layout(GOOD)  # back on the default dashboard
    assert client.delete(f"{url}?name=default").status_code == 403  # CSRF
