"""Read API: runs, catalog, series (downsampling, zoom, ranges)."""

from __future__ import annotations

from urllib.parse import quote, unquote

import numpy as np
import orjson
import pytest
from django.test import Client

from ingest.core.series_ids import KINDS, series_id
from ingest.models import Project
from ingest.pipeline.materialize import materialize_all
from ingest.reads import catalog as reads
from ingest.write.frames import handle_object

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def project() -> int:
    return Project.objects.create(name="proj").pk


def ingest(project: int, msg: dict) -> None:
    assert handle_object(project, msg).reply["type"] == "ack", msg
    materialize_all()


def get(path: str) -> dict:
    response = Client().get(path)
    assert response.status_code == 200, response.content
    return orjson.loads(response.content)


def ids_param(*sids: str) -> str:
    return ",".join(quote(s, safe="") for s in sids)


def parse_series_id(sid: str) -> tuple[str, str, str | None, str | None]:
    """The test's own reading of a series id (ingest.core.series_ids: the four parts
    percent-encoded and joined by `|`, an empty part for None)."""
    parts = sid.split("|")
    assert len(parts) == 4 and parts[0] in KINDS and parts[1], sid
    kind, key, stat, env = (unquote(p) for p in parts)
    return kind, key, stat or None, env or None


def test_runs_lists_runs_with_their_fields(project: int) -> None:
    ingest(project, {"v": 1, "id": "a", "type": "step", "run": "r1", "step": 4,
                     "metrics": {"x": 1.0}})
    runs = get("/api/runs")["runs"]
    assert [(r["name"], r["project"], r["status"], r["last_step"]) for r in runs] == [
        ("r1", "proj", "running", 4)]
    assert set(runs[0]) == {"id", "project", "name", "status", "last_step", "started_at",
                            "updated_at", "color", "notes", "tags", "total_steps", "eta_seconds",
                            "first_step", "steps_done"}
    assert get("/api/runs?project=other")["runs"] == []


def test_catalog_places_keys_by_grammar_and_never_collides(project: int) -> None:
    ingest(project, {"v": 1, "id": "a", "type": "step", "run": "r", "step": 0, "metrics": {
        "entropy": 1.0, "loss/total": 2.0, "timing/total": 3.0, "timing/forward/total": 4.0,
        "reward": 5.0, "timing_step_total": 6.0}})
    ingest(project, {"v": 1, "id": "b", "type": "samples", "run": "r", "step": 0,
                     "sample_id": [1, 2], "group_id": [1, 1], "reward": [0.0, 1.0]})
    run_id = get("/api/runs")["runs"][0]["id"]
    series = get(f"/api/runs/{run_id}/catalog")["series"]
    by_key = {(s["kind"], s["key"], s["stat"]): s for s in series if not s.get("normalized")}
    assert [by_key[("step", k, None)]["section"] for k in
            ("entropy", "loss/total", "timing/total", "timing/forward/total")] == [
        "General", "loss", "timing", "timing"]
    assert by_key[("step", "timing/forward/total", None)]["group"] == "forward"
    assert by_key[("step", "timing_step_total", None)]["section"] == "Timeline"
    # A user key named "reward" and the reward family are different series.
    assert by_key[("step", "reward", None)]["id"] != by_key[("reward", "reward", "mean")]["id"]
    assert len({s["id"] for s in series}) == len(series)
    for s in series:
        stat = f"norm:{s['stat']}" if s.get("normalized") else s["stat"]
        assert parse_series_id(s["id"]) == (s["kind"], s["key"], stat, s["env"])
    # the normalized twin of the reward mean sits beside it
    twin = [s for s in series if s.get("normalized") and s["stat"] == "mean" and not s["env"]]
    assert [(s["kind"], s["key"]) for s in twin] == [("reward", "reward")]


def test_series_ids_survive_hostile_keys() -> None:
    for key in ("a,b", "a|b", "a%2Cb", "<img src=x onerror=alert(1)>", "ü/ñ"):
        sid = series_id("step", key)
        assert "," not in sid and parse_series_id(sid) == ("step", key, None, None)


def test_series_are_downsampled_keeping_extremes_and_zoom_fetches_finer(project: int) -> None:
    rng = np.random.default_rng(1)
    values = rng.normal(0, 1, 5000)
    values[1234] = 50.0  # a spike that must survive downsampling
    body = [{"v": 1, "id": f"m{i}", "type": "step", "run": "r", "step": i, "time": 1000.0 + i,
             "metrics": {"loss": float(v)}} for i, v in enumerate(values)]
    for msg in body:
        assert handle_object(project, msg).reply["type"] == "ack"
    materialize_all()
    run_id = get("/api/runs")["runs"][0]["id"]
    sid = series_id("step", "loss")
    full = get(f"/api/runs/{run_id}/series?ids={ids_param(sid)}&max_points=500")["series"][sid]
    assert full["downsampled"] and len(full["step"]) == 500
    assert max(full["bucket_max"]) == 50.0 and min(full["bucket_min"]) == values.min()
    assert 1234 in full["step"]
    assert np.all(np.array(full["bucket_min"]) <= np.array(full["value"]))
    assert full["range"] == {"min": values.min(), "max": 50.0, "source": "observed",
                             "invert": False}
    zoom = get(f"/api/runs/{run_id}/series?ids={ids_param(sid)}&min_step=1000&max_step=1199"
               )["series"][sid]
    assert not zoom["downsampled"] and zoom["step"] == list(range(1000, 1200))
    assert zoom["value"] == values[1000:1200].tolist()
    assert zoom["time"] == [1000.0 + s for s in range(1000, 1200)]


def test_declared_ranges_are_the_effective_range(project: int) -> None:
    ingest(project, {"v": 1, "id": "start", "type": "run.start", "run": "r", "environments": [
        {"name": "countdown", "reward_min": 0.0, "reward_max": 2.0,
         "metrics_ranges": {"steps": {"min": 0, "max": 20, "invert": True}}}]})
    ingest(project, {"v": 1, "id": "s", "type": "samples", "run": "r", "step": 0,
                     "env": "countdown", "sample_id": [1, 2], "group_id": [0, 0],
                     "reward": [0.5, 1.0], "metrics": {"steps": [3, 4]}})
    run_id = get("/api/runs")["runs"][0]["id"]
    sids = [series_id("reward", "reward", "mean", "countdown"),
            series_id("sample", "steps", "mean", None), series_id("reward", "reward", "std")]
    got = get(f"/api/runs/{run_id}/series?ids={ids_param(*sids)}")["series"]
    assert got[sids[0]]["range"] == {"min": 0.0, "max": 2.0, "source": "declared",
                                     "invert": False}
    assert got[sids[1]]["range"] == {"min": 0, "max": 20, "source": "declared", "invert": True}
    assert got[sids[2]]["range"]["source"] == "observed"


def test_bad_series_requests_name_the_parameter(project: int) -> None:
    ingest(project, {"v": 1, "id": "a", "type": "step", "run": "r", "step": 0,
                     "metrics": {"x": 1.0}})
    run_id = get("/api/runs")["runs"][0]["id"]
    client = Client()
    for query, field in (("", "ids"), ("ids=a&max_points=abc", "max_points"),
                         ("ids=a&max_points=1", "max_points"), ("ids=a&min_step=x", "min_step")):
        response = client.get(f"/api/runs/{run_id}/series?{query}")
        assert response.status_code == 400
        assert orjson.loads(response.content)["field"] == field
    assert client.get("/api/runs/999/catalog").status_code == 404


def test_the_cache_follows_new_points_and_withdrawals(project: int) -> None:
    """Cached arrays are refreshed by seq: a new point, an overwritten point and a withdrawn
    point all show on the next read."""
    reads.CACHE.arrays.clear()
    base = {"v": 1, "type": "samples", "run": "r", "sample_id": [1, 2], "group_id": [0, 0]}
    ingest(project, {**base, "id": "1", "step": 0, "reward": [0.0, 1.0]})
    run_id = get("/api/runs")["runs"][0]["id"]
    sid = series_id("reward", "reward", "gini_mean")
    url = f"/api/runs/{run_id}/series?ids={ids_param(sid)}"
    assert get(url)["series"][sid]["value"] == [0.5]
    ingest(project, {**base, "id": "2", "step": 1, "reward": [1.0, 1.0]})
    assert get(url)["series"][sid]["value"] == [0.5, 0.0]
    ingest(project, {**base, "id": "3", "step": 1, "reward": [-1.0, 1.0],
                     "sample_id": [3, 4]})
    assert get(url)["series"][sid]["step"] == [0]


def test_a_colour_change_needs_the_csrf_token(project: int) -> None:
    ingest(project, {"v": 1, "id": "a", "type": "step", "run": "r", "step": 0,
                     "metrics": {"x": 1.0}})
    run_id = get("/api/runs")["runs"][0]["id"]
    client = Client(enforce_csrf_checks=True)
    body = orjson.dumps({"color": "#ff8800"})
    refused = client.patch(f"/api/runs/{run_id}", body, content_type="application/json")
    assert refused.status_code == 403
    client.get(f"/runs/{run_id}/metrics")  # the page sets the csrftoken cookie
    token = client.cookies["csrftoken"].value
    ok = client.patch(f"/api/runs/{run_id}", body, content_type="application/json",
                      headers={"X-CSRFToken": token})
    assert ok.status_code == 200 and orjson.loads(ok.content)["color"] == "#ff8800"
    bad = client.patch(f"/api/runs/{run_id}", orjson.dumps({"color": "red"}),
                       content_type="application/json", headers={"X-CSRFToken": token})
    assert bad.status_code == 400 and orjson.loads(bad.content)["field"] == "color"
