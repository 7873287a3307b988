"""The Custom view's layout API: layouts (version 2: sections, groups, multi-series plots) per
project and dashboard name, validated field by field with limits, CSRF-protected, served with
the page; layouts saved by version 1 migrated; templates, built-in and the project's own."""

from __future__ import annotations

import io
from typing import Any

import orjson
import pytest
from django.core.management import call_command
from django.test import Client

from ingest.models import Project, Run
from ingest.write.frames import handle_object
from telescope_ui.layouts import MAX_PLOTS, MAX_SERIES, MAX_TEMPLATES, clean_layout
from telescope_ui.models import Layout

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


def put(client: Client, run_id: int, body: Any, headers: dict[str, str],
        path: str = "layout") -> Any:
    return client.put(f"/api/runs/{run_id}/{path}", orjson.dumps(body),
                      content_type="application/json", headers=headers)


def plot(pid: str, *sids: str, **extra: Any) -> dict[str, Any]:
    return {"type": "plot", "id": pid, "title": "", "wide": False, "settings": {},
            "series": [{"id": s, "axis": "auto"} for s in sids], **extra}


GOOD = {"version": 2, "sections": [
    {"id": "s1", "title": "Policy", "collapsed": False, "items": [
        plot("p1", "step|entropy||", wide=True, settings={"logY": True, "yMax": 2.5}),
        {"type": "group", "id": "g1", "title": "KL", "plots": [
            {**plot("p2", "step|train%2Fkl_mean||"),
             "series": [{"id": "step|train%2Fkl_mean||", "axis": "left"},
                        {"id": "step|train%2Fkl_max||", "axis": "right"}]}]},
    ]},
    {"id": "s2", "title": "Reward", "collapsed": True, "items": [
        plot("p3", "step|entropy||", title="Entropy again"),  # the same series twice: fine
    ]},
]}

# A layout as the version before sections saved it (and `demo` still writes).
V1 = [{"id": "step|entropy||", "wide": True, "settings": {"logY": True, "yMax": 2.5}},
      {"id": "reward|reward|mean|countdown", "wide": False, "settings": {}}]
V1_MIGRATED = {"version": 2, "sections": [{"id": "s1", "title": "Charts", "collapsed": False,
                                           "items": [
    plot("p1", "step|entropy||", wide=True, settings={"logY": True, "yMax": 2.5}),
    plot("p2", "reward|reward|mean|countdown")]}]}


def test_a_layout_is_saved_per_project_and_shared_by_its_runs() -> None:
    a1, a2, b1 = make_run("a", "a1"), make_run("a", "a2"), make_run("b", "b1")
    client, headers = page_client(a1)
    assert client.get(f"/api/runs/{a1}/layout").json() == {
        "project": "a", "name": "default", "names": [], "version": 2, "sections": [],
        "updated_at": None}
    saved = put(client, a1, GOOD, headers)
    assert saved.status_code == 200, saved.content
    assert saved.json()["sections"] == GOOD["sections"]
    assert client.get(f"/api/runs/{a2}/layout").json()["sections"] == GOOD["sections"]
    assert client.get(f"/api/runs/{b1}/layout").json()["sections"] == []  # another project
    page = client.get(f"/runs/{a2}/metrics?view=custom").content.decode()
    assert 'id="run-layout"' in page and "train%2Fkl_max" in page
    assert 'id="run-layout"' not in client.get(f"/runs/{a2}/metrics").content.decode()
    put(client, a2, {"version": 2, "sections": GOOD["sections"][1:]}, headers)  # replaced whole
    assert client.get(f"/api/runs/{a1}/layout").json()["sections"] == GOOD["sections"][1:]


def test_a_layout_saved_by_version_1_is_read_as_version_2() -> None:
    run_id = make_run("a", "a1")
    project = Run.objects.get(pk=run_id).project
    Layout.objects.create(project=project, name="default", charts=V1)  # stored before v2
    got = Client().get(f"/api/runs/{run_id}/layout").json()
    assert {k: got[k] for k in ("version", "sections")} == V1_MIGRATED
    page = Client().get(f"/runs/{run_id}/metrics?view=custom").content.decode()
    assert '"version": 2' in page and '"title": "Charts"' in page
    # A version 1 body (a script of before) is still taken, checked as before, and migrated.
    client, headers = page_client(run_id)
    saved = put(client, run_id, {"charts": V1}, headers)
    assert saved.status_code == 200 and saved.json()["sections"] == V1_MIGRATED["sections"]
    assert Layout.objects.get(project=project).charts == V1_MIGRATED  # stored as version 2
    bad = put(client, run_id, {"charts": [{"id": "a"}, {"id": "a"}]}, headers)
    assert bad.status_code == 400 and bad.json()["field"] == "charts[1].id"


def many_plots(n: int) -> list[dict[str, Any]]:
    return [plot(f"p{i}", "a") for i in range(n)]


def with_plot(**fields: Any) -> dict[str, Any]:
    return {"version": 2, "sections": [{"id": "s1", "items": [{**plot("p1", "a"), **fields}]}]}


@pytest.mark.parametrize(("body", "field"), [
    ([], "body"),
    ({"version": 3, "sections": []}, "version"),
    ({"sections": []}, "version"),
    ({"version": 2, "sections": {}}, "sections"),
    ({"version": 2, "sections": ["x"]}, "sections[0]"),
    ({"version": 2, "sections": [{"id": "s1", "items": [], "colour": 1}]}, "sections[0].colour"),
    ({"version": 2, "sections": [{"id": "s 1", "items": []}]}, "sections[0].id"),
    ({"version": 2, "sections": [{"id": "s1", "items": []}, {"id": "s1", "items": []}]},
     "sections[1].id"),
    ({"version": 2, "sections": [{"id": "s1", "title": "x" * 201, "items": []}]},
     "sections[0].title"),
    ({"version": 2, "sections": [{"id": "s1", "collapsed": 1, "items": []}]},
     "sections[0].collapsed"),
    ({"version": 2, "sections": [{"id": "s1", "items": {}}]}, "sections[0].items"),
    (with_plot(type="chart"), "sections[0].items[0].type"),
    (with_plot(id="s1"), "sections[0].items[0].id"),
    (with_plot(series=[]), "sections[0].items[0].series"),
    (with_plot(series=[{"id": ""}]), "sections[0].items[0].series[0].id"),
    (with_plot(series=[{"id": "a"}, {"id": "a"}]), "sections[0].items[0].series[1].id"),
    (with_plot(series=[{"id": "a", "axis": "up"}]), "sections[0].items[0].series[0].axis"),
    (with_plot(series=[{"id": f"k{i}"} for i in range(MAX_SERIES + 1)]),
     "sections[0].items[0].series"),
    (with_plot(wide="yes"), "sections[0].items[0].wide"),
    (with_plot(settings={"logY": "yes"}), "sections[0].items[0].settings.logY"),
    (with_plot(settings={"yMin": "0"}), "sections[0].items[0].settings.yMin"),
    (with_plot(settings={"zoom": 2}), "sections[0].items[0].settings.zoom"),
    ({"version": 2, "sections": [{"id": "s1", "items": [
        {"type": "group", "id": "g1", "plots": [{"type": "group", "id": "g2", "plots": []}]}]}]},
     "sections[0].items[0].plots[0].plots"),
    ({"version": 2, "sections": [{"id": "s1", "items": many_plots(MAX_PLOTS + 1)}]},
     f"sections[0].items[{MAX_PLOTS}]"),
    ({"version": 2, "sections": [{"id": f"s{i}", "items": []} for i in range(51)]}, "sections"),
    ({"version": 2, "sections": [], "base": 5}, "base"),
    ({"charts": [{"id": "a", "settings": {"logY": "yes"}}]}, "charts[0].settings.logY"),
])
def test_a_bad_layout_is_refused_naming_the_field(body: Any, field: str) -> None:
    run_id = make_run("a", "a1")
    client, headers = page_client(run_id)
    put(client, run_id, GOOD, headers)
    resp = put(client, run_id, body, headers)
    assert resp.status_code == 400 and resp.json()["field"] == field, resp.content
    assert client.get(f"/api/runs/{run_id}/layout").json()["sections"] == GOOD["sections"]


def test_saving_needs_the_csrf_token_and_a_real_run() -> None:
    run_id = make_run("a", "a1")
    client, headers = page_client(run_id)
    assert put(client, run_id, GOOD, {}).status_code == 403
    assert put(client, run_id + 999, GOOD, headers).status_code == 404
    bad_json = client.put(f"/api/runs/{run_id}/layout", b"{", content_type="application/json",
                          headers=headers)
    assert bad_json.status_code == 400 and bad_json.json()["field"] == "body"
    assert client.post(f"/api/runs/{run_id}/layout", {}, headers=headers).status_code == 405
    assert put(client, run_id, GOOD, {}, "templates?name=x").status_code == 403


def test_the_demo_gives_its_project_a_starter_dashboard_of_existing_charts() -> None:
    call_command("demo", "--steps", "6", stdout=io.StringIO())
    run_id = next(r["id"] for r in Client().get("/api/runs").json()["runs"])
    layout = Client().get(f"/api/runs/{run_id}/layout").json()
    catalog = {e["id"] for e in Client().get(f"/api/runs/{run_id}/catalog").json()["series"]}
    ids = [s["id"] for p in layout["sections"][0]["items"] for s in p["series"]]
    assert layout["project"] == "demo" and len(ids) == 7
    assert set(ids) <= catalog, set(ids) - catalog
    call_command("demo", "--if-empty", stdout=io.StringIO())  # a second call changes nothing
    assert len(Client().get("/api/runs").json()["runs"]) == 1


def test_a_save_based_on_a_stale_layout_is_refused_with_the_current_one() -> None:
    run_id = make_run("a", "a1")
    client, headers = page_client(run_id)
    first = put(client, run_id, {"version": 2, "sections": [], "base": None}, headers)
    assert first.status_code == 200  # nothing stored yet
    loaded = first.json()["updated_at"]
    other = put(client, run_id, {**GOOD, "base": loaded}, headers)  # another page saves
    assert other.status_code == 200
    mine = {"version": 2, "sections": [{"id": "s9", "items": []}]}
    stale = put(client, run_id, {**mine, "base": loaded}, headers)
    assert stale.status_code == 409 and stale.json()["field"] == "base"
    assert stale.json()["layout"]["sections"] == GOOD["sections"]
    again = put(client, run_id, {**mine, "base": other.json()["updated_at"]}, headers)
    assert again.status_code == 200 and again.json()["sections"][0]["id"] == "s9"
    assert put(client, run_id, {"version": 2, "sections": []}, headers).status_code == 200


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
    assert gone.json()["sections"] == clean_layout(GOOD)["sections"]  # back on the default one
    assert client.delete(f"{url}?name=default").status_code == 403  # CSRF


def test_templates_are_built_in_or_saved_per_project() -> None:
    a1, b1 = make_run("a", "a1"), make_run("b", "b1")
    client, headers = page_client(a1)
    builtin = client.get(f"/api/runs/{a1}/templates").json()["templates"]
    assert [(t["name"], t["builtin"]) for t in builtin] == [("GRPO health", True)]
    health = builtin[0]
    assert clean_layout(health)["sections"] == health["sections"]  # a valid layout itself
    keys = {s["id"].split("|")[1] for sec in health["sections"] for it in sec["items"]
            for p in it.get("plots", [it]) for s in p["series"]}
    assert {"reward", "groups", "kl_divergence_inference",
            "train%2Fkl_mean", "entropy", "grad_norm", "train%2Fclip_frac",
            "stop_reason_length_pct"} <= keys

    saved = put(client, a1, GOOD, headers, "templates?name=Mine")
    assert saved.status_code == 200, saved.content
    names = [t["name"] for t in saved.json()["templates"]]
    assert names == ["GRPO health", "Mine"]
    assert saved.json()["templates"][1]["sections"] == GOOD["sections"]
    assert len(client.get(f"/api/runs/{b1}/templates").json()["templates"]) == 1  # per project
    again = put(client, a1, {"version": 2, "sections": []}, headers, "templates?name=Mine")
    assert again.json()["templates"][1]["sections"] == []  # replaced
    refused = put(client, a1, GOOD, headers, "templates?name=GRPO%20health")
    assert refused.status_code == 409 and refused.json()["field"] == "name"
    bad = put(client, a1, with_plot(wide=1), headers, "templates?name=Bad")
    assert bad.status_code == 400 and bad.json()["field"] == "sections[0].items[0].wide"
    assert put(client, a1, GOOD, headers, "templates").json()["field"] == "name"
    gone = client.delete(f"/api/runs/{a1}/templates?name=Mine", headers=headers)
    assert [t["name"] for t in gone.json()["templates"]] == ["GRPO health"]
    assert client.delete(f"/api/runs/{a1}/templates?name=GRPO%20health",
                         headers=headers).status_code == 409


def test_a_project_keeps_a_bounded_number_of_templates() -> None:
    run_id = make_run("a", "a1")
    client, headers = page_client(run_id)
    empty = {"version": 2, "sections": []}
    for i in range(MAX_TEMPLATES):
        assert put(client, run_id, empty, headers, f"templates?name=t{i}").status_code == 200
    over = put(client, run_id, empty, headers, "templates?name=one-more")
    assert over.status_code == 400 and over.json()["field"] == "name"
    assert put(client, run_id, empty, headers, "templates?name=t0").status_code == 200
