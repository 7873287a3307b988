"""The Metrics page's first screen comes with the page (ingest/reads/first_screen.py): its charts
are drawn without a series request, from exactly the points the series API returns for them at
the page's points per trace — a long run's too, at most widths; at a width whose figure the
server did not know yet the page asks, and its next visit is embedded."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.browser.conftest import Dashboard, step

KEYS = [f"metric_{i:02d}" for i in range(12)]

# Each chart in the viewport: its series ids (the page's run), and whether it is a Plotly chart
# with points.
IN_VIEW = """() => [...document.querySelectorAll('.chart')].filter(el => {
    const r = el.getBoundingClientRect(); return r.bottom > 0 && r.top < innerHeight; })
  .map(el => ({ ids: el.chart.ids(telescope.runs[0]),
                drawn: el.classList.contains('rendered')
                  && el.querySelector('.plot').data.some(t => t.x && t.x.length > 0) }))"""
STORED = """sid => { const d = telescope.runs[0].series.get(sid)?.data;
  return d ? { step: d.step, value: d.value, bmin: d.bmin, bmax: d.bmax } : null; }"""


def build(dashboard: Dashboard, run: str, steps: int) -> int:
    for first in range(0, steps, 500):
        dashboard.post([step(run, n, {k: ((n * (i + 3)) % 17) / 4 for i, k in enumerate(KEYS)},
                             time=1000.0 + n)
                        for n in range(first, min(steps, first + 500))])
    return dashboard.run_id(run)


def series_requests(pg: Any) -> list[str]:
    asked: list[str] = []

    def on_request(request: Any) -> None:
        parts = urlsplit(request.url)
        if parts.path.endswith("/series"):
            asked.extend(parse_qs(parts.query)["ids"][0].split(","))

    pg.on("request", on_request)
    return asked


def first_screen(pg: Any) -> list[dict[str, Any]]:
    pg.wait_for_function(f"() => {{ const c = ({IN_VIEW})(); return c.length > 0 "
                         "&& c.every(x => x.drawn); }", timeout=30_000)
    return list(pg.evaluate(IN_VIEW))


def same_as_the_api(dashboard: Dashboard, pg: Any, run_id: int, ids: list[str]) -> None:
    points = pg.evaluate("telescope.maxPoints")
    api = dashboard.get(f"/api/runs/{run_id}/series?ids={','.join(ids)}"
                        f"&max_points={points}")["series"]
    for sid in ids:
        got, want = pg.evaluate(STORED, sid), api[sid]
        assert got["step"] == want["step"] and got["value"] == want["value"], sid
        assert got["bmin"] == want.get("bucket_min") and got["bmax"] == want.get("bucket_max")


def test_the_first_screen_is_drawn_from_the_page_alone(dashboard: Dashboard, page: Any) -> None:
    run_id = build(dashboard, "short", 200)
    asked = series_requests(page)
    page.goto(f"{dashboard.url}/runs/{run_id}/metrics")
    charts = first_screen(page)
    ids = sorted({sid for c in charts for sid in c["ids"]})
    assert len(ids) >= 4 and not set(ids) & set(asked), asked
    same_as_the_api(dashboard, page, run_id, ids)


def test_a_long_runs_first_screen_is_embedded_too(dashboard: Dashboard, page: Any) -> None:
    run_id = build(dashboard, "long", 3000)  # more points than any page draws: downsampled
    asked = series_requests(page)
    page.goto(f"{dashboard.url}/runs/{run_id}/metrics")
    ids = sorted({sid for c in first_screen(page) for sid in c["ids"]})
    assert not set(ids) & set(asked), asked  # at the points of most widths (800)
    same_as_the_api(dashboard, page, run_id, ids)
    assert page.evaluate(STORED, ids[0])["bmin"] is not None  # the buckets' bands came too


def test_another_width_asks_once_and_is_embedded_the_next_time(dashboard: Dashboard,
                                                               browser: Any) -> None:
    run_id = build(dashboard, "narrow", 3000)
    context = browser.new_context(viewport={"width": 760, "height": 900}, bypass_csp=True)
    try:
        pg = context.new_page()
        asked = series_requests(pg)
        pg.goto(f"{dashboard.url}/runs/{run_id}/metrics")
        ids = sorted({sid for c in first_screen(pg) for sid in c["ids"]})
        assert pg.evaluate("telescope.maxPoints") != 800 and set(ids) <= set(asked)
        same_as_the_api(dashboard, pg, run_id, ids)
        asked.clear()
        pg.reload()  # the page's figure is in its cookie now
        ids = sorted({sid for c in first_screen(pg) for sid in c["ids"]})
        assert not set(ids) & set(asked), asked
        same_as_the_api(dashboard, pg, run_id, ids)
    finally:
        context.close()
