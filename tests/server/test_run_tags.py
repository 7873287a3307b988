"""A run's tags (PATCH /api/runs/<id> {"tags"}, docs/protocol.md "One run"): stored sorted and
distinct, refused naming the bad tag, the run list filtered by one (`?tag=`), and changed only by
who may write; the run list's headline column (`?headline=`: each run's latest point of a
series, the reward's mean by default); a script's write without the CSRF token gets JSON."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from django.contrib.auth.models import User
from django.test import Client

from ingest.core.series_ids import series_id
from ingest.models import Project, Run
from ingest.pipeline.materialize import materialize_all
from ingest.write.frames import handle_object

pytestmark = pytest.mark.django_db(transaction=True)
REMOTE = {"REMOTE_ADDR": "10.1.2.3"}


@pytest.fixture
def project() -> int:
    return Project.objects.create(name="proj").pk


def send(project: int, run: str, **msg: Any) -> int:
    reply = handle_object(project, {"v": 1, "run": run, **msg}).reply
    assert reply["type"] == "ack", reply
    return Run.objects.get(project_id=project, name=run).pk


def csrf_client(**extra: Any) -> tuple[Client, dict[str, str]]:
    client = Client(enforce_csrf_checks=True, **extra)
    client.get("/")  # a page sets the CSRF cookie
    return client, {"HTTP_X_CSRFTOKEN": client.cookies["csrftoken"].value}


def patch(run_id: int, body: Any, **extra: Any) -> Any:
    client, csrf = csrf_client(**extra)
    return client.patch(f"/api/runs/{run_id}", orjson.dumps(body),
                        content_type="application/json", **csrf)


def listed(query: str = "") -> list[dict[str, Any]]:
    res = Client().get(f"/api/runs{query}")
    assert res.status_code == 200, res.content
    return res.json()["runs"]


# ------------------------------------------------------------------ tags


def test_tags_are_set_by_patch_and_filter_the_run_list(project: int) -> None:
    a = send(project, "a", id="a0", type="step", step=0, metrics={"x": 1.0})
    b = send(project, "b", id="b0", type="step", step=0, metrics={"x": 1.0})
    assert listed()[0]["tags"] == []
    res = patch(a, {"tags": ["lr-sweep", "baseline", "lr-sweep", "ünïcode ok"]})
    assert res.status_code == 200, res.content
    assert res.json()["tags"] == ["baseline", "lr-sweep", "ünïcode ok"]  # sorted, distinct
    assert patch(b, {"tags": ["lr-sweep"]}).status_code == 200
    assert Run.objects.get(pk=a).tags == ["baseline", "lr-sweep", "ünïcode ok"]
    assert {r["name"] for r in listed("?tag=lr-sweep")} == {"a", "b"}
    assert [r["name"] for r in listed("?tag=baseline")] == ["a"]
    assert listed("?tag=nope") == []
    assert Client().get(f"/api/runs/{a}").json()["tags"] == ["baseline", "lr-sweep", "ünïcode ok"]
    assert patch(a, {"tags": []}).json()["tags"] == []
    assert [r["name"] for r in listed("?tag=baseline")] == []


@pytest.mark.parametrize(("tags", "field"), [
    ("lr-sweep", "tags"),
    ({"a": 1}, "tags"),
    ([f"t{i}" for i in range(33)], "tags"),
    (["ok", 7], "tags[1]"),
    (["ok", ""], "tags[1]"),
    (["   "], "tags[0]"),
    (["x" * 65], "tags[0]"),
    (["ok", " padded"], "tags[1]"),
    (["a\nb"], "tags[0]"),
    (["evil\u202egnp"], "tags[0]"),  # a bidi override: the same rule as every name
    (["zero\u200bwidth"], "tags[0]"),
])
def test_bad_tags_are_refused_naming_the_tag(project: int, tags: Any, field: str) -> None:
    run_id = send(project, "r", id="s0", type="step", step=0, metrics={"x": 1.0})
    assert patch(run_id, {"tags": ["kept"]}).status_code == 200
    res = patch(run_id, {"tags": tags})
    assert res.status_code == 400, res.content
    assert res.json()["field"] == field
    assert Run.objects.get(pk=run_id).tags == ["kept"]


def test_anonymous_public_readers_cannot_change_tags(project: int, settings: Any) -> None:
    settings.TELESCOPE_PUBLIC_READ = True
    run_id = send(project, "r", id="s0", type="step", step=0, metrics={"x": 1.0})
    assert Client(**REMOTE).get(f"/api/runs/{run_id}").status_code == 200  # reading is open
    res = patch(run_id, {"tags": ["mine"]}, **REMOTE)
    assert res.status_code == 401
    assert Run.objects.get(pk=run_id).tags == []
    User.objects.create_user("ada", password="lovelace-1843")
    client, csrf = csrf_client(**REMOTE)
    assert client.login(username="ada", password="lovelace-1843")
    res = client.patch(f"/api/runs/{run_id}", orjson.dumps({"tags": ["mine"]}),
                       content_type="application/json", **csrf)
    assert res.status_code == 200 and Run.objects.get(pk=run_id).tags == ["mine"]


# ------------------------------------------------------------------ headline column


def test_the_headline_is_each_runs_latest_reward_mean_or_a_chosen_series(project: int) -> None:
    a = send(project, "a", id="a0", type="samples", step=0, sample_id=["1", "2"],
             group_id=[0, 0], reward=[0.0, 1.0])
    send(project, "a", id="a1", type="samples", step=3, sample_id=["3", "4"], group_id=[0, 0],
         reward=[0.25, 0.5])
    send(project, "a", id="a2", type="step", step=3, metrics={"loss": 2.5, "phase": "warm"})
    b = send(project, "b", id="b0", type="step", step=1, metrics={"loss": 0.125})
    materialize_all()
    runs = {r["id"]: r for r in listed("?headline=")}
    assert runs[a]["headline"] == {"step": 3, "value": 0.375}
    assert runs[b]["headline"] is None  # no samples: no reward
    assert "headline" not in listed()[0]  # asked for only
    loss = {r["id"]: r["headline"] for r in listed(f"?headline={series_id('step', 'loss')}")}
    assert loss == {a: {"step": 3, "value": 2.5}, b: {"step": 1, "value": 0.125}}
    phase = {r["id"]: r["headline"] for r in listed(f"?headline={series_id('step', 'phase')}")}
    assert phase == {a: {"step": 3, "value": "warm"}, b: None}
    mean = series_id("reward", "reward", "mean", None)
    assert {r["id"]: r["headline"] for r in listed(f"?headline={mean}")} == {
        a: {"step": 3, "value": 0.375}, b: None}


# ------------------------------------------------------------------ CSRF


def test_an_api_write_without_the_csrf_token_gets_json_a_form_html(project: int) -> None:
    run_id = send(project, "r", id="s0", type="step", step=0, metrics={"x": 1.0})
    client = Client(enforce_csrf_checks=True)
    for res in (client.delete(f"/api/runs/{run_id}"),
                client.patch(f"/api/runs/{run_id}", b'{"tags": ["x"]}',
                             content_type="application/json")):
        assert res.status_code == 403
        assert res["Content-Type"] == "application/json"
        body = res.json()
        assert body["code"] == "csrf" and "CSRF" in body["error"]
    assert Run.objects.filter(pk=run_id).exists()
    # With the token the same DELETE goes through.
    client, csrf = csrf_client()
    assert client.delete(f"/api/runs/{run_id}", **csrf).status_code == 200
    # A form posted to a page without it still gets Django's HTML page.
    res = Client(enforce_csrf_checks=True).post("/accounts/logout/")
    assert res.status_code == 403
    assert res["Content-Type"].startswith("text/html")
    assert b"CSRF verification failed" in res.content
