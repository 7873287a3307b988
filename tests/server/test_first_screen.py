"""The Metrics page's embedded first screen (ingest/reads/first_screen.py, telescope_ui/pages.py):
what it embeds is what the series API returns for the same ids, in the All view's section order,
within its budget; its JSON cannot end the script element whatever a key holds; it is only in a
page the reader may read."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from typing import Any
from urllib.parse import quote

import orjson
import pytest
from django.test import Client

from ingest.models import Project, Run
from ingest.pipeline.materialize import materialize_all
from ingest.reads import catalog as reads
from ingest.reads import first_screen
from ingest.write.frames import handle_object

pytestmark = pytest.mark.django_db(transaction=True)
HOSTILE = "x</script><script>alert(1)</script><!--&amp;"


class Scripts(HTMLParser):
    """The text of each `<script id=…>` of a page, as a browser's parser splits them."""

    def __init__(self) -> None:
        super().__init__()
        self.found: dict[str, str] = {}
        self.types: dict[str, str | None] = {}
        self._open: str | None = None
        self.count = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        named = dict(attrs)
        self.count += tag == "script"
        if tag == "script" and named.get("id"):
            self._open = str(named["id"])
            self.found[self._open] = ""
            self.types[self._open] = named.get("type")

    def handle_data(self, data: str) -> None:
        if self._open:
            self.found[self._open] += data

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._open = None


def scripts(html: str) -> Scripts:
    parser = Scripts()
    parser.feed(html)
    return parser


@pytest.fixture
def run_id() -> int:
    """A run with trainer keys in General and two sections, a hostile key, and samples (the
    derived sections, their Data quality counters)."""
    project = Project.objects.create(name="proj").pk
    msgs: list[dict[str, Any]] = [{"v": 1, "id": "start", "type": "run.start", "run": "r",
                                   "environments": [{"name": "env", "reward_min": 0,
                                                     "reward_max": 1}]}]
    for step in range(30):
        msgs.append({"v": 1, "id": f"s{step}", "type": "step", "run": "r", "step": step,
                     "time": 1000.0 + step, "metrics": {
                         "loss/policy": step * 0.5, "entropy": 1.0 / (step + 1),
                         "zsection/late": float(step), HOSTILE: 2.0 * step}})
        msgs.append({"v": 1, "id": f"x{step}", "type": "samples", "run": "r", "step": step,
                     "env": "env", "sample_id": [1, 2, 3, 4], "group_id": [0, 0, 1, 1],
                     "reward": [0.0, 0.5, 1.0, step / 30]})
    for msg in msgs:
        assert handle_object(project, msg).reply["type"] == "ack", msg
    materialize_all()
    return Run.objects.get(name="r").pk


def embedded(html: str) -> dict[str, Any]:
    """The page's first screen, each series with its step and time arrays put back from the
    shared `axes` (as static/js/metrics.js takeEmbedded does)."""
    found = scripts(html)
    assert found.types["run-series"] == "application/json"  # data, never run (CSP)
    body: dict[str, Any] = orjson.loads(found.found["run-series"])
    axes = body.pop("axes")
    for sid, payload in body["series"].items():
        step, time = axes[payload.pop("axis")]
        body["series"][sid] = {"step": step, "time": time, **payload}
    return body


def test_series_logged_at_the_same_steps_share_their_step_and_time_arrays(run_id: int) -> None:
    html = Client().get(f"/runs/{run_id}/metrics").content.decode()
    raw = orjson.loads(scripts(html).found["run-series"])
    # Steps 0..29 for every series: the trainer's keys at the times it sent, the sections
    # derived from its samples at the times they were received (another pair).
    assert len(raw["axes"]) == 2 and len(raw["series"]) > 5
    assert all("step" not in p and "time" not in p for p in raw["series"].values())
    trainer = {p["axis"] for sid, p in raw["series"].items() if sid.startswith("step|")}
    derived = {p["axis"] for sid, p in raw["series"].items() if not sid.startswith("step|")}
    assert len(trainer) == len(derived) == 1 and trainer != derived
    step, time = raw["axes"][trainer.pop()]
    assert step == list(range(30)) and time == [1000.0 + n for n in range(30)]


def test_the_page_embeds_what_the_series_api_returns(run_id: int) -> None:
    client = Client()
    client.cookies["telescope_points"] = "400"
    body = embedded(client.get(f"/runs/{run_id}/metrics").content.decode())
    assert body["max_points"] == 400 and body["series"]
    ids = list(body["series"])
    api = orjson.loads(client.get(f"/api/runs/{run_id}/series",
                                  {"ids": ",".join(ids), "max_points": "400"}).content)
    assert body["series"] == api["series"] and body["seq"] == api["seq"]
    # Each of the run's charted entries, but no normalized twin and no Data quality counter.
    catalog = reads.catalog(Run.objects.get(pk=run_id))["series"]
    charted = {e["id"] for e in catalog if not e.get("normalized")
               and e["stat"] not in first_screen.QUALITY_STATS}
    assert set(ids) == charted and "reward|reward|null_count|" not in ids


def test_series_come_in_the_all_views_section_order() -> None:
    def entry(sid: str, kind: str, key: str, section: str, stat: str | None = None,
              **extra: Any) -> dict[str, Any]:
        return {"id": sid, "kind": kind, "key": key, "stat": stat, "env": None,
                "section": section, **extra}

    entries = [entry("late", "step", "zsection/late", "zsection"),
               entry("reward", "reward", "reward", "Reward", "mean"),
               entry("norm", "reward", "reward", "Reward", "mean", normalized=True),
               entry("timing", "step", "timing_step_total", "Timeline"),
               entry("entropy", "step", "entropy", "General"),
               entry("nulls", "reward", "reward", "Reward", "null_count"),
               entry("loss", "step", "loss/policy", "loss"),
               entry("tokens", "rollouts", "completion_tokens", "Rollouts", "mean")]
    order = [e["id"] for e in first_screen.page_order(entries)]
    # General, the trainer's sections by first appearance, then the fixed ones in page order;
    # a trainer's timing_* key is in Timeline; no normalized twin, no Data quality counter.
    assert order == ["entropy", "late", "loss", "reward", "tokens", "timing"]


def test_the_budget_bounds_what_is_embedded(run_id: int) -> None:
    catalog = reads.catalog(Run.objects.get(pk=run_id))["series"]
    ordered = [e["id"] for e in first_screen.page_order(catalog)]
    few = first_screen.first_screen(run_id, catalog, 300, max_series=3)
    assert list(few["series"]) == ordered[:3]
    # 30 points per series: 100 points hold three of them, whole.
    by_points = first_screen.first_screen(run_id, catalog, 300, max_total_points=100)
    assert list(by_points["series"]) == ordered[:3]


def test_the_points_cookie_is_bounded_and_a_bad_one_ignored(run_id: int) -> None:
    for cookie, points in (("5", 400), ("999999", 2000), ("many", 800), (None, 800)):
        client = Client()
        if cookie is not None:
            client.cookies["telescope_points"] = cookie
        assert embedded(client.get(f"/runs/{run_id}/metrics").content.decode())[
            "max_points"] == points, cookie


def test_a_hostile_key_cannot_end_the_element(run_id: int) -> None:
    html = Client().get(f"/runs/{run_id}/metrics").content.decode()
    element = re.search(r'<script id="run-series" type="application/json">(.*?)</script>',
                        html, re.S)
    assert element is not None
    assert "<" not in element.group(1) and ">" not in element.group(1)
    sid = f"step|{quote(HOSTILE, safe='')}||"
    body = embedded(html)
    assert body["series"][sid]["value"][:3] == [0.0, 2.0, 4.0]
    # The page's scripts are its own: the module and the three data elements.
    found = scripts(html)
    assert found.count == 4 and set(found.found) == {"run-info", "run-catalog", "run-series"}


def test_only_the_all_view_and_only_readers_get_it(run_id: int, settings: Any) -> None:
    assert "run-series" not in Client().get(f"/runs/{run_id}/metrics?view=custom").content.decode()
    remote = Client(REMOTE_ADDR="10.1.2.3")
    page = remote.get(f"/runs/{run_id}/metrics")
    assert page.status_code == 302 and b"run-series" not in page.content
    settings.TELESCOPE_PUBLIC_READ = True
    assert "run-series" in Client(REMOTE_ADDR="10.1.2.3").get(
        f"/runs/{run_id}/metrics").content.decode()
