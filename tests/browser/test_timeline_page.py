"""The Timeline page in Chromium, fed through the real HTTP ingest: every span drawn in its
lane (WebGL segments counted), a zoom that refetches the window and writes it into the URL (a
copied URL opens the same view), a click that shows a span and whose sample link opens the
sample viewer, the Chrome trace export, the empty state and a running run's first events
arriving live, the run's tabs, and the page under the Content-Security-Policy."""

from __future__ import annotations

import json
import time
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

from tests.browser.conftest import Dashboard, step

pytestmark = pytest.mark.browser

T = time.time() - 120  # the run's first event: two minutes ago

GENERATIONS = [  # server 0, slots 0 and 1; statuses in every colour
    {"name": "generation", "start": T + 1, "end": T + 9, "source": "inference", "server": 0,
     "slot": 0, "step": 1, "status": None, "tokens": 300, "sample_id": "s-a", "group_id": "g0"},
    {"name": "generation", "start": T + 10, "end": T + 14, "source": "inference", "server": 0,
     "slot": 0, "step": 1, "status": "discarded", "tokens": 120, "sample_id": "s-b",
     "group_id": "g0"},
    {"name": "generation", "start": T + 2, "end": T + 6, "source": "inference", "server": 0,
     "slot": 1, "step": 1, "status": "canceled", "tokens": None},
    {"name": "generation", "start": T + 30, "end": T + 40, "source": "inference", "server": 0,
     "slot": 1, "step": 2, "status": "eval", "tokens": 50},
    {"name": "weight_sync", "start": T + 20, "end": T + 22, "source": "inference", "server": 0,
     "step": 2},
]
TRAINER = [  # two ranks, nested spans
    *({"name": "train_step", "start": T + 15 + 10 * s, "end": T + 24 + 10 * s, "step": s,
       "rank": r} for s in (0, 1) for r in (0, 1)),
    *({"name": "train_step/forward", "start": T + 16 + 10 * s, "end": T + 19 + 10 * s,
       "step": s, "rank": r} for s in (0, 1) for r in (0, 1)),
]
INSTANTS = [
    {"name": "training_loop_start", "start": T},
    {"name": "save_batch", "start": T + 14.5, "step": 1, "source": "orchestrator"},
    {"name": "save_batch", "start": T + 29, "step": 2, "source": "orchestrator"},
]
EVENTS = GENERATIONS + TRAINER + INSTANTS
LANES = ["server 0", "server 0 · slot 0", "server 0 · slot 1", "trainer", "trainer rank 0",
         "trainer rank 1", "orchestrator"]


def events_msg(run: str, mid: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """An events message from rows (each column given, null where a row lacks it)."""
    cols = ("name", "start", "end", "step", "rank", "server", "slot", "status", "tokens",
            "sample_id", "group_id")
    msg: dict[str, Any] = {"v": 1, "id": mid, "type": "events", "run": run,
                           "source": [r.get("source", "trainer") for r in rows]}
    for c in cols:
        if any(c in r for r in rows):
            msg[c] = [r.get(c) for r in rows]
    return msg


def samples_msg(run: str, step_: int) -> dict[str, Any]:
    return {"v": 1, "id": f"{run}-samples-{step_}", "type": "samples", "run": run,
            "step": step_, "sample_id": ["s-a", "s-b"], "group_id": ["g0", "g0"],
            "reward": [1.0, 0.0], "completion": ["yes", "no"]}


def open_timeline(pg: Any, dashboard: Dashboard, run: str, query: str = "") -> int:
    run_id = dashboard.run_id(run)
    pg.goto(f"{dashboard.url}/runs/{run_id}/timeline{query}")
    pg.wait_for_selector("#timeline[data-drawn]", state="attached", timeout=20_000)
    return run_id


def drawn(pg: Any) -> dict[str, Any]:
    """What the page drew: spans per colour on its canvas (those in view), instants per name
    as Plotly markers, the row labels, the x range, the canvas's kind."""
    return pg.evaluate("""() => { const gd = document.getElementById('gantt');
        const p = window.telescopeTimeline;
        const out = {segments: {...p.spans.stats.byCategory}, markers: {}, rows: [], range: null,
                     kind: p.spans.kind};
        for (const t of gd.data || []) {
            if (t.mode === 'markers') out.markers[t.name] = (out.markers[t.name] || 0) + t.x.length;
        }
        out.rows = Array.from(gd.layout.yaxis.ticktext);
        out.range = Array.from(gd._fullLayout.xaxis.range);
        return out; }""")


def pixel(pg: Any, x: float, y: float) -> list[int]:
    """The colour (r, g, b) the spans' canvas has at page point (x, y)."""
    return list(pg.evaluate("""([x, y]) => { const c = window.telescopeTimeline.spans.canvas;
        const r = c.getBoundingClientRect();
        const copy = document.createElement('canvas');
        copy.width = c.width; copy.height = c.height;
        const g = copy.getContext('2d'); g.drawImage(c, 0, 0);
        const px = Math.floor((x - r.left) * c.width / r.width);
        const py = Math.floor((y - r.top) * c.height / r.height);
        return Array.from(g.getImageData(px, py, 1, 1).data.slice(0, 3)); }""", [x, y]))


def hex_rgb(color: str) -> list[int]:
    return [int(color[i:i + 2], 16) for i in (1, 3, 5)]


def test_every_span_is_drawn_as_a_webgl_segment_in_its_lane(page: Any, dashboard: Dashboard
                                                            ) -> None:
    dashboard.post([events_msg("tl", "tl-ev", EVENTS)])
    open_timeline(page, dashboard, "tl")
    fig = drawn(page)
    assert fig["rows"] == LANES
    assert fig["kind"] == "webgl"
    assert fig["segments"] == {"generation · normal": 1, "generation · discarded": 1,
                               "generation · canceled": 1, "generation · eval": 1,
                               "weight_sync": 1, "train_step": 4, "train_step/forward": 4}
    assert fig["markers"] == {"training_loop_start": 1, "save_batch": 2}
    root = page.locator("#timeline")
    assert root.get_attribute("data-spans") == "13"
    assert root.get_attribute("data-instants") == "3"
    assert "13 spans · 3 instants · 7 lanes" in page.text_content("#counts")
    # On screen in their colours: a discarded generation, a forward inside its train_step,
    # and the bare row (band or background) between two spans of a rank.
    colors = page.evaluate("() => Object.fromEntries(window.telescopeTimeline.shown.list"
                           ".map(l => [l.category, l.color]))")
    assert pixel(page, *span_point(page, event_index(page, "generation", T + 10))) == hex_rgb(
        colors["generation · discarded"])
    assert pixel(page, *span_point(page, event_index(page, "train_step/forward", T + 16))) == (
        hex_rgb(colors["train_step/forward"]))
    assert pixel(page, *time_point(page, T + 19.5, "trainer rank 0")) == hex_rgb(
        colors["train_step"])  # past the forward inside it
    between = pixel(page, *time_point(page, T + 24.5, "trainer rank 0"))  # between two steps
    assert between not in [hex_rgb(c) for c in colors.values()]
    # Without a window in the URL the page shows the whole of a short run, and follows it.
    assert page.get_attribute("#follow-newest", "aria-pressed") == "true"
    assert "start=" not in page.url


def test_a_zoom_refetches_the_window_and_a_copied_url_opens_the_same_view(
        page: Any, dashboard: Dashboard) -> None:
    dashboard.post([events_msg("zm", "zm-ev", EVENTS)])
    run_id = open_timeline(page, dashboard, "zm")
    asked: list[dict[str, list[str]]] = []
    page.on("request", lambda r: asked.append(parse_qs(urlparse(r.url).query))
            if f"/api/runs/{run_id}/events?" in r.url else None)
    draws = int(page.get_attribute("#timeline", "data-drawn"))
    origin = page.evaluate("() => window.telescopeTimeline.origin")
    # Zoom to [T - 0.5, T + 12): slot 0's first two generations, the canceled one, the loop start.
    lo, hi = T - 0.5 - origin, T + 12 - origin
    page.evaluate("([lo, hi]) => window.Plotly.relayout(document.getElementById('gantt'),"
                  " {'xaxis.range[0]': lo, 'xaxis.range[1]': hi})", [lo, hi])
    page.wait_for_function("n => Number(document.getElementById('timeline').dataset.drawn) > n",
                           arg=draws, timeout=10_000)
    window = next(q for q in reversed(asked) if "start" in q and "end" in q)
    assert float(window["start"][0]) == pytest.approx(T - 0.5, abs=1e-5)
    assert float(window["end"][0]) == pytest.approx(T + 12, abs=1e-5)
    query = parse_qs(urlparse(page.url).query)
    assert float(query["start"][0]) == pytest.approx(T - 0.5, abs=1e-5)
    assert float(query["end"][0]) == pytest.approx(T + 12, abs=1e-5)
    fig = drawn(page)
    assert fig["segments"] == {"generation · normal": 1, "generation · discarded": 1,
                               "generation · canceled": 1}
    assert fig["markers"] == {"training_loop_start": 1}
    assert page.get_attribute("#follow-newest", "aria-pressed") == "false"
    # The URL, opened in a fresh page, shows that window.
    copied = page.url
    fresh = page.context.new_page()
    fresh.goto(copied)
    fresh.wait_for_selector("#timeline[data-drawn]", state="attached", timeout=20_000)
    assert drawn(fresh)["range"] == pytest.approx([lo, hi], abs=1e-4)
    assert drawn(fresh)["segments"] == fig["segments"]
    # "Newest" goes back to the run's newest events (here all of them), following the run.
    draws = int(fresh.get_attribute("#timeline", "data-drawn"))
    fresh.click("#follow-newest")
    fresh.wait_for_function("n => Number(document.getElementById('timeline').dataset.drawn) > n",
                            arg=draws, timeout=10_000)
    assert "start=" not in fresh.url
    assert sum(drawn(fresh)["segments"].values()) == 13
    assert fresh.get_attribute("#follow-newest", "aria-pressed") == "true"
    fresh.close()


def span_point(pg: Any, index: int) -> tuple[float, float]:
    """The page coordinates of the middle of drawn event `index`."""
    return tuple(pg.evaluate("""i => { const p = window.telescopeTimeline;
        const gd = document.getElementById('gantt'); const fl = gd._fullLayout;
        const e = p.shown.events; const r = p.shown.row[i];
        const mid = ((e.end[i] ?? e.start[i]) + e.start[i]) / 2 - p.origin;
        const rect = gd.getBoundingClientRect();
        return [rect.left + fl.xaxis._offset + fl.xaxis.l2p(mid),
                rect.top + fl.yaxis._offset + fl.yaxis.l2p(r)]; }""", index))


def time_point(pg: Any, t: float, lane: str) -> tuple[float, float]:
    """The page coordinates of time `t` (unix s) on the row of `lane`."""
    return tuple(pg.evaluate("""([t, lane]) => { const p = window.telescopeTimeline;
        const gd = document.getElementById('gantt'); const fl = gd._fullLayout;
        const r = p.shown.rows.findIndex(row => row.label === lane);
        const rect = gd.getBoundingClientRect();
        return [rect.left + fl.xaxis._offset + fl.xaxis.l2p(t - p.origin),
                rect.top + fl.yaxis._offset + fl.yaxis.l2p(r)]; }""", [t, lane]))


def event_index(pg: Any, name: str, start: float) -> int:
    return int(pg.evaluate("""([name, start]) => { const e = window.telescopeTimeline.shown.events;
        return e.name.findIndex((n, i) => n === name && Math.abs(e.start[i] - start) < 1e-6); }""",
                           [name, start]))


def test_a_click_shows_the_span_and_its_sample_link_opens_the_sample_viewer(
        page: Any, dashboard: Dashboard) -> None:
    dashboard.post([events_msg("ck", "ck-ev", EVENTS), samples_msg("ck", 1)])
    run_id = open_timeline(page, dashboard, "ck")
    # The nested forward span: a click inside it picks it, not the train_step around it.
    x, y = span_point(page, event_index(page, "train_step/forward", T + 16))
    page.mouse.click(x, y)
    page.wait_for_selector("#span-details[data-span='train_step/forward']")
    assert page.text_content("#span-details [data-field=rank]") == "0"
    assert page.locator("#span-details .sample-link").count() == 0
    assert "null" not in page.text_content("#span-details")
    # The first generation: its fields and its sample.
    x, y = span_point(page, event_index(page, "generation", T + 1))
    page.mouse.click(x, y)
    page.wait_for_selector("#span-details[data-span='generation']")
    field = lambda name: page.text_content(f"#span-details [data-field={name}]")  # noqa: E731
    assert (field("source"), field("server"), field("slot"), field("step")) == (
        "inference", "0", "0", "1")
    assert (field("status"), field("tokens"), field("sample")) == ("normal", "300", "s-a")
    assert field("duration") == "8 s"
    link = page.locator("#span-details .sample-link")
    assert link.get_attribute("href") == f"/runs/{run_id}/samples?step=1"
    link.click()
    page.wait_for_url(f"**/runs/{run_id}/samples?step=1")
    page.wait_for_selector("#samples[data-loaded]")
    assert page.get_attribute("#samples", "data-step") == "1"
    assert page.locator(".sample[data-sample-id='s-a']").count() == 1


def test_export_downloads_the_window_as_a_chrome_trace(page: Any, dashboard: Dashboard) -> None:
    dashboard.post([events_msg("ex", "ex-ev", EVENTS)])
    run_id = open_timeline(page, dashboard, "ex", f"?start={T - 0.5}&end={T + 12}")
    href = page.get_attribute("#export-trace", "href")
    assert href.startswith(f"/api/runs/{run_id}/events.trace.json?")
    query = parse_qs(urlparse(href).query)
    assert float(query["start"][0]) == pytest.approx(T - 0.5, abs=1e-5)
    with page.expect_download() as info:
        page.click("#export-trace")
    with open(info.value.path()) as f:
        trace = json.load(f)
    spans = sorted((e["name"], e["ph"]) for e in trace["traceEvents"] if e["ph"] in "Xi")
    assert spans == [("generation", "X"), ("generation", "X"), ("generation", "X"),
                     ("training_loop_start", "i")]


def test_a_run_without_events_says_so_and_its_first_events_arrive_live(
        page: Any, dashboard: Dashboard) -> None:
    dashboard.post([step("quiet", 0, {"loss": 1.0})])
    open_timeline(page, dashboard, "quiet")
    assert page.is_visible("#empty")
    assert "This run has sent no events yet" in page.text_content("#empty")
    assert "docs/protocol.md" in page.text_content("#empty")
    assert not page.is_visible("#gantt")
    page.evaluate("window.__sameDocument = true")
    dashboard.post([events_msg("quiet", "quiet-ev", EVENTS)])
    page.wait_for_function("() => document.getElementById('timeline').dataset.spans === '13'",
                           timeout=15_000)
    assert page.evaluate("window.__sameDocument") is True  # no reload
    assert not page.is_visible("#empty")
    assert drawn(page)["rows"] == LANES


def test_more_events_than_the_limit_are_said_to_be_cut(page: Any, dashboard: Dashboard) -> None:
    dashboard.post([events_msg("many", "many-ev", EVENTS)])
    run_id = dashboard.run_id("many")
    # The page asks for the API's default limit; a smaller one, as a proxy would set it.
    page.route(f"**/api/runs/{run_id}/events?*", lambda route: route.continue_(
        url=route.request.url + "&limit=5"))
    open_timeline(page, dashboard, "many")
    assert page.is_visible("#truncated")
    assert "Zoom in to see every event" in page.text_content("#truncated")
    assert page.get_attribute("#timeline", "data-spans") != "13"


def test_the_run_tabs_and_the_overview_link_to_the_timeline_and_performance(
        page: Any, dashboard: Dashboard) -> None:
    dashboard.post([step("tabs", 0, {"loss": 1.0})])
    run_id = dashboard.run_id("tabs")
    for path in (f"/runs/{run_id}/metrics", f"/runs/{run_id}/samples", f"/runs/{run_id}",
                 f"/runs/{run_id}/timeline", f"/runs/{run_id}/performance"):
        page.goto(dashboard.url + path)
        page.wait_for_load_state("networkidle")
        hrefs = page.eval_on_selector_all("a", "as => as.map(a => a.getAttribute('href'))")
        assert f"/runs/{run_id}/timeline" in hrefs, path
        assert f"/runs/{run_id}/performance" in hrefs, path
    page.goto(f"{dashboard.url}/runs/{run_id}/metrics")
    page.wait_for_load_state("networkidle")
    # The Metrics page rewrites its All / Custom tabs with the runs shown, and only those.
    assert page.get_attribute(".view-tabs a:has-text('Samples')", "href") == (
        f"/runs/{run_id}/samples")
    page.click(".view-tabs a:has-text('Timeline')")
    page.wait_for_selector("#timeline[data-drawn]", state="attached", timeout=20_000)
    assert page.get_attribute(".view-tabs a[aria-current=page]", "href") == (
        f"/runs/{run_id}/timeline")


def test_the_timeline_and_performance_pages_keep_to_the_policy(
        dashboard: Dashboard, strict_page: tuple[Any, list[str]]) -> None:
    pg, problems = strict_page
    dashboard.post([events_msg("csp", "csp-ev", EVENTS)])
    run_id = dashboard.run_id("csp")
    for path, ready in [(f"/runs/{run_id}/timeline", "#timeline[data-drawn]"),
                        (f"/runs/{run_id}/performance", "#performance[data-drawn]")]:
        pg.goto(dashboard.url + path)
        pg.wait_for_selector(ready, state="attached", timeout=20_000)
        pg.wait_for_load_state("networkidle")
        assert not problems, (path, problems)
    # Zooms redraw under the policy too: a drag across the plot, then the keyboard.
    pg.goto(f"{dashboard.url}/runs/{run_id}/timeline")
    pg.wait_for_selector("#timeline[data-drawn='1']", state="attached", timeout=20_000)
    box = pg.locator("#gantt .nsewdrag").bounding_box()
    pg.mouse.move(box["x"] + box["width"] * 0.2, box["y"] + 20)
    pg.mouse.down()
    pg.mouse.move(box["x"] + box["width"] * 0.5, box["y"] + 40, steps=8)
    pg.mouse.up()
    pg.wait_for_selector("#timeline[data-drawn='2']", state="attached", timeout=20_000)
    assert "start=" in pg.url
    pg.keyboard.press("w")
    pg.wait_for_selector("#timeline[data-drawn='3']", state="attached", timeout=20_000)
    pg.wait_for_load_state("networkidle")
    assert not problems, problems
    assert pg.locator("#load-error").text_content() == ""
