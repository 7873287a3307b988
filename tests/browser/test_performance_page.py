"""The Performance page in Chromium, fed through the real HTTP ingest: the time buckets drawn
as the read API computes them (hand-checked where the run makes them plain), the filling
bucket marked, the gauges one chart per name with a line per host and device, a bucket size
change that refetches and stays in the URL, and a running run's new events arriving live."""

from __future__ import annotations

import math
import time
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

from tests.browser.conftest import Dashboard, step
from tests.browser.test_timeline_page import events_msg

pytestmark = pytest.mark.browser

# Aligned to every bucket size offered (10 s … 5 min), a quarter of an hour ago.
T0 = math.floor((time.time() - 900) / 300) * 300

# One inference lane busy from T0 + 1 to T0 + 181 (six generations of 30 s, 600 tokens each),
# rank 0 working from T0 + 60 to T0 + 90: in the bucket [T0 + 60, T0 + 120) of 60 s the lane is
# busy all the time and the trainer half of it.
GENERATIONS = [{"name": "generation", "start": T0 + 1 + 30 * k, "end": T0 + 31 + 30 * k,
                "source": "inference", "server": 0, "slot": 0, "step": k, "tokens": 600}
               for k in range(6)]
TRAINER = [{"name": "train_step", "start": T0 + 60, "end": T0 + 90, "step": 1, "rank": 0}]


def gauges_msg(run: str, mid: str, rows: list[tuple[str, str | None, int | None, float, float]]
               ) -> dict[str, Any]:
    """A gauges message of (name, host, device, time, value) rows."""
    names, hosts, devices, times, values = (list(c) for c in zip(*rows, strict=True))
    return {"v": 1, "id": mid, "type": "gauges", "run": run, "name": names, "host": hosts,
            "device": devices, "time": times, "value": values}


GAUGES = [
    *(("gpu/util_pct", "node-1", d, T0 + 10 * i, 10.0 * i + d) for d in (0, 1) for i in range(5)),
    *(("gpu/util_pct", "node-2", 0, T0 + 10 * i, 50.0) for i in range(5)),
    *(("cpu/util_pct", "node-1", None, T0 + 10 * i, 5.0 + i) for i in range(5)),
]


def open_performance(pg: Any, dashboard: Dashboard, run: str, query: str = "") -> int:
    run_id = dashboard.run_id(run)
    pg.goto(f"{dashboard.url}/runs/{run_id}/performance{query}")
    pg.wait_for_selector("#performance[data-drawn]", state="attached", timeout=20_000)
    return run_id


def traces(pg: Any, chart: str) -> list[dict[str, Any]]:
    return pg.evaluate("""id => { const gd = document.querySelector(`[data-chart="${id}"]`);
        return (gd && gd.data || []).map(t => ({name: t.name, meta: t.meta, x: Array.from(t.x),
            y: Array.from(t.y), dash: t.line && t.line.dash || null,
            symbol: t.marker && t.marker.symbol || null})); }""", chart)


def by_series(found: list[dict[str, Any]], partial: bool) -> dict[str, list[Any]]:
    return {t["meta"]["series"]: t["y"] for t in found if t["meta"]["partial"] is partial}


def test_the_buckets_are_drawn_as_the_api_computes_them_with_the_filling_one_marked(
        page: Any, dashboard: Dashboard) -> None:
    dashboard.post([events_msg("pf", "pf-ev", GENERATIONS + TRAINER)])
    run_id = open_performance(page, dashboard, "pf")
    api = dashboard.get(f"/api/runs/{run_id}/performance?bucket=60")
    assert api["time"] == [T0, T0 + 60, T0 + 120, T0 + 180]
    assert api["partial"] == [False, False, False, True]
    shares = traces(page, "time-pct")
    whole, open_ = by_series(shares, partial=False), by_series(shares, partial=True)
    for name in ("inference_utilization_pct", "weight_sync_pct", "trainer_working_pct",
                 "trainer_idle_pct"):
        assert whole[name] == api["series"][name][:3], name
        assert open_[name] == api["series"][name][2:], name  # last complete → filling bucket
    # The bucket [T0 + 60, T0 + 120): the lane always busy, the trainer half of the time.
    assert whole["inference_utilization_pct"][1] == pytest.approx(100)
    assert whole["trainer_working_pct"][1] == pytest.approx(50)
    assert whole["trainer_idle_pct"][1] == pytest.approx(50)
    counts = by_series(traces(page, "generations"), partial=False)
    assert counts["generations"] == api["series"]["generations"][:3] == [1, 2, 2]
    tokens = by_series(traces(page, "tokens"), partial=False)["tokens_per_second"]
    assert tokens == pytest.approx([10, 20, 20])  # 600 tokens per generation ending there / 60 s
    filling = [t for t in shares if t["meta"]["partial"]]
    assert all(t["dash"] == "dot" and t["symbol"] == "circle-open" for t in filling)
    assert "still filling" in page.text_content("#partial-note")
    assert page.evaluate("""() => document.querySelector('[data-chart="time-pct"]')
        ._fullLayout.yaxis.range""") == [0, 100]
    assert page.is_hidden("#buckets-empty")


def test_gauges_are_one_chart_per_name_with_a_line_per_host_and_device(
        page: Any, dashboard: Dashboard) -> None:
    dashboard.post([events_msg("gg", "gg-ev", GENERATIONS), gauges_msg("gg", "gg-g", GAUGES)])
    open_performance(page, dashboard, "gg")
    assert page.get_attribute("#performance", "data-gauges") == "2"
    sections = page.eval_on_selector_all("#gauges [data-section]", "els => els.map(e => "
                                         "[e.dataset.section, Array.from(e.querySelectorAll("
                                         "'[data-gauge]')).map(p => p.dataset.gauge)])")
    assert sections == [["cpu", ["cpu/util_pct"]], ["gpu", ["gpu/util_pct"]]]
    gpu = traces(page, "gauge:gpu/util_pct")
    assert [t["name"] for t in gpu] == ["node-1 · device 0", "node-1 · device 1",
                                        "node-2 · device 0"]
    assert gpu[1]["y"] == [1.0, 11.0, 21.0, 31.0, 41.0]
    assert gpu[2]["y"] == [50.0] * 5
    cpu = traces(page, "gauge:cpu/util_pct")
    assert [(t["name"], t["y"]) for t in cpu] == [("node-1", [5.0, 6.0, 7.0, 8.0, 9.0])]
    assert page.is_hidden("#gauges-empty")


def test_a_bucket_size_change_refetches_and_stays_in_the_url(page: Any, dashboard: Dashboard
                                                            ) -> None:
    dashboard.post([events_msg("bk", "bk-ev", GENERATIONS + TRAINER)])
    run_id = open_performance(page, dashboard, "bk")
    assert page.get_attribute("#performance", "data-buckets") == "4"
    asked: list[str] = []
    page.on("request", lambda r: asked.append(r.url) if "/performance?" in r.url else None)
    page.select_option("#bucket", "10")
    page.wait_for_function("() => document.getElementById('performance').dataset.bucket === '10'"
                           " && !document.getElementById('performance').dataset.loading")
    assert any(parse_qs(urlparse(u).query).get("bucket") == ["10"] for u in asked)
    assert parse_qs(urlparse(page.url).query)["bucket"] == ["10"]
    api = dashboard.get(f"/api/runs/{run_id}/performance?bucket=10")
    assert page.get_attribute("#performance", "data-buckets") == str(len(api["time"])) == "19"
    counts = by_series(traces(page, "generations"), partial=False)
    assert counts["generations"] == api["series"]["generations"][:-1]
    page.reload()
    page.wait_for_selector("#performance[data-drawn]", state="attached", timeout=20_000)
    assert page.input_value("#bucket") == "10"
    assert page.get_attribute("#performance", "data-buckets") == "19"


def test_a_running_runs_new_events_and_gauges_arrive_without_a_reload(
        page: Any, dashboard: Dashboard) -> None:
    dashboard.post([step("lv", 0, {"loss": 1.0})])
    open_performance(page, dashboard, "lv")
    assert page.is_visible("#buckets-empty") and page.is_visible("#gauges-empty")
    page.evaluate("window.__sameDocument = true")
    dashboard.post([events_msg("lv", "lv-ev", GENERATIONS), gauges_msg("lv", "lv-g", GAUGES)])
    page.wait_for_function("() => document.getElementById('performance').dataset.buckets === '4'"
                           " && document.getElementById('performance').dataset.gauges === '2'",
                           timeout=15_000)
    assert page.evaluate("window.__sameDocument") is True
    assert page.is_hidden("#buckets-empty") and page.is_hidden("#gauges-empty")
    later = [{**g, "start": g["start"] + 180, "end": g["end"] + 180} for g in GENERATIONS]
    dashboard.post([events_msg("lv", "lv-ev2", later)])
    page.wait_for_function("() => document.getElementById('performance').dataset.buckets === '7'",
                           timeout=15_000)


def test_low_gpu_utilisation_while_busy_is_flagged_with_its_evidence(
        page: Any, dashboard: Dashboard) -> None:
    # The lane generates without a break for 4 minutes while the GPUs read 8 %: every whole
    # 60-s bucket is busy and its GPUs idle.
    busy = [{"name": "generation", "start": T0 + 60 * k, "end": T0 + 60 * (k + 1),
             "source": "inference", "server": 0, "slot": 0, "step": k, "tokens": 10}
            for k in range(4)]
    idle_gpus = [("gpu/util_pct", "node-1", d, T0 + 10 * i, 8.0) for d in (0, 1)
                 for i in range(24)]
    dashboard.post([events_msg("gpu", "gpu-ev", busy), gauges_msg("gpu", "gpu-g", idle_gpus)])
    open_performance(page, dashboard, "gpu", "?bucket=60")
    hint = page.locator("#health-hint")
    hint.wait_for(state="visible", timeout=10_000)
    assert "GPU utilisation low while the run is busy: 8% on average" in hint.inner_text()
    assert "generated 100% of the time" in hint.inner_text()
    # A run whose GPU readings cover only the first of its busy minutes is not flagged: no
    # evidence for the others (the hint is drawn before the page marks itself drawn).
    dashboard.post([events_msg("gpu2", "gpu2-ev", GENERATIONS),
                    gauges_msg("gpu2", "gpu2-g", GAUGES)])
    open_performance(page, dashboard, "gpu2", "?bucket=60")
    assert page.is_hidden("#health-hint")
