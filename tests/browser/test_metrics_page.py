"""The Metrics page (All view) in Chromium against a live server with real ingest."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import pytest

from ingest.core.series_ids import series_id
from tests.browser.conftest import ARTIFACTS, chart_data, step, trace, wait_chart

pytestmark = pytest.mark.browser

KEYS = ["entropy", "grad_norm", "loss/policy", "loss/kl", "perf/gpu/util", "timing_step_total",
        "timing_forward_microbatch_mean"]
FIXED_ORDER = ["Reward", "Sample metrics", "Advantage", "Groups", "Rollouts",
               "Discarded rollouts", "Timeline", "Ranges"]
ENVS = [{"name": "countdown", "reward_min": 0.0, "reward_max": 2.0,
         "metrics_ranges": {"correct": {"min": 0.0, "max": 1.0}}}]


QUALITY = {"null_count", "gini_excluded", "outside_count", "canceled"}


def family(e: dict) -> tuple:
    """The chart an entry is drawn in (static/js/charts/compose.js familyKey): one per metric."""
    base = (e["kind"], e["key"], e["group"])
    if e["kind"] == "step":
        return (*base, e["id"])
    if e["stat"] in QUALITY:
        return (*base, "q", e["stat"])
    if e["kind"] in ("groups", "ranges"):
        return base
    return (*base, "value" if e["stat"] in ("mean", "std", "min", "max") else e["stat"])


def sid(key: str) -> str:
    return series_id("step", key)


def samples(run: str, n: int, rewards: list[float]) -> dict:
    k = len(rewards)
    return {"v": 1, "id": f"{run}-samples-{n}", "type": "samples", "run": run, "step": n,
            "env": "countdown", "sample_id": [f"{n}-{i}" for i in range(k)],
            "group_id": [f"{n}-g{i // 2}" for i in range(k)], "reward": rewards,
            "advantage": [r - sum(rewards) / k for r in rewards],
            "prompt_tokens": [100] * k, "completion_tokens": [200 + i for i in range(k)],
            "stop_reason": ["stop"] * k, "metrics": {"correct": [r / 2 for r in rewards]}}


def section_titles(pg) -> list[str]:
    return pg.eval_on_selector_all(
        "section.section:not([hidden]) .section-title", "els => els.map(e => e.textContent)")


def visible_charts(pg) -> int:
    return pg.eval_on_selector_all(".chart:not([hidden])", "els => els.length")


def open_metrics(pg, dashboard, run: str, query: str = "") -> int:
    run_id = dashboard.run_id(run)
    pg.goto(f"{dashboard.url}/runs/{run_id}/metrics{query}")
    return run_id


def wait_drawn_near(pg) -> None:
    """Wait until the Metrics page has drawn every chart near the viewport as the layout is now
    and has nothing left to load or draw. The page's IntersectionObservers say which charts are
    near; one the test makes last reports after them (the same rendering update notifies
    observers in the order they were made), so its report means theirs are in."""
    pg.evaluate("""() => new Promise(resolve => {
        const io = new IntersectionObserver(() => { io.disconnect(); resolve(); });
        io.observe(document.body); })""")
    pg.wait_for_function("""() => { const t = window.telescope;
        return [...t.view.charts.values()].every(c => !c.near || c.rendered)
          && t.scheduler.queue.size === 0 && t.loader.pending.size === 0; }""")


def test_it_renders_sections_in_order_and_adds_new_ones_live(page, dashboard):
    dashboard.post([step("r", n, {k: float(n + i) for i, k in enumerate(KEYS)}) for n in range(5)])
    open_metrics(page, dashboard, "r")
    wait_chart(page, sid("entropy"))
    assert section_titles(page) == ["General", "loss", "perf", "Timeline"]
    assert visible_charts(page) == len(KEYS)
    groups = page.eval_on_selector_all(
        "[data-section='fixed:Timeline'] .group-title", "els => els.map(e => e.textContent)")
    assert groups == ["Full step", "Per microbatch"]

    # Samples arrive: derived sections appear in place, without a reload.
    page.evaluate("window.__same_page = true")
    dashboard.post([{"v": 1, "id": "start", "type": "run.start", "run": "r",
                     "environments": ENVS}]
                   + [samples("r", n, [0.0, 2.0, 1.0, 1.0]) for n in range(5)])
    page.wait_for_function("document.querySelector('[data-section=\"fixed:Reward\"]') !== null")
    page.wait_for_timeout(500)
    catalog = dashboard.get(f"/api/runs/{dashboard.run_id('r')}/catalog")["series"]
    derived = [s for s in FIXED_ORDER if any(e["section"] == s for e in catalog)]
    assert {"Reward", "Sample metrics", "Advantage", "Groups", "Rollouts"} <= set(derived)
    # Data-quality counters (null counts, Gini-excluded groups, …) have a section of their own.
    assert any(e["stat"] in QUALITY for e in catalog)
    assert section_titles(page) == ["General", "loss", "perf", *derived, "Data quality"]
    # Normalized series are no charts of their own: the Normalize toggle switches their twins.
    # A chart per metric: its statistics and environments are composed in it.
    raw = [e for e in catalog if not e.get("normalized")]
    assert len(raw) < len(catalog)
    charts = {family(e) for e in raw}
    assert len(charts) < len(raw)
    page.wait_for_function(f"document.querySelectorAll('.chart').length === {len(charts)}")
    page.wait_for_function(f"window.telescope.view.bySeries.size === {len(raw)}")
    assert page.evaluate("window.__same_page") is True


def test_a_step_sent_over_the_websocket_appears_without_reload(page, dashboard):
    dashboard.post([step("live", n, {"entropy": 1.0 - n / 10}) for n in range(5)])
    open_metrics(page, dashboard, "live")
    wait_chart(page, sid("entropy"))
    page.evaluate("window.__same_page = true")
    trainer = dashboard.ingest_socket()
    try:
        trainer.send(step("live", 5, {"entropy": 0.123}))
        fig = wait_chart(page, sid("entropy"), "gd.data.some(t => t.meta.role === 'raw' && "
                         "t.x[t.x.length - 1] === 5)")
        raw = next(t for t in fig["data"] if t["meta"]["role"] == "raw")
        assert raw["x"] == [0, 1, 2, 3, 4, 5]
        assert raw["y"][-1] == pytest.approx(0.123)
        # A brand-new key shows up as a new chart, live.
        trainer.send(step("live", 6, {"entropy": 0.1, "new/metric": 7.0}))
        fig = wait_chart(page, sid("new/metric"))
        assert next(t for t in fig["data"] if t["meta"]["role"] == "raw")["y"] == [7.0]
        # However fast steps come, a chart redraws at most a few times per second.
        page.evaluate("""sid => { window.__draws = [];
            document.addEventListener('telescope:drawn', e => {
              if (e.detail.id === sid) window.__draws.push(e.detail.startedAt); }); }""",
                      sid("entropy"))
        start = time.monotonic()
        for n in range(7, 47):
            trainer.send(step("live", n, {"entropy": 1.0 / n}))
        elapsed = time.monotonic() - start
        wait_chart(page, sid("entropy"), "gd.data.find(t => t.meta.role === 'raw').x.includes(46)")
        draws = page.evaluate("window.__draws")
        assert len(draws) <= elapsed / 0.25 + 3, (len(draws), elapsed)
        gaps = [b - a for a, b in zip(draws, draws[1:], strict=False)]
        assert all(g >= 249 for g in gaps), gaps  # start to start: how long a draw takes varies
    finally:
        trainer.close()
    assert page.evaluate("window.__same_page") is True


def test_two_runs_overlay_with_their_colours(page, dashboard):
    dashboard.post([step("a", n, {"entropy": 1.0 + n}) for n in range(4)]
                   + [step("b", n, {"entropy": 2.0 + n}) for n in range(6)])
    a, b = dashboard.run_id("a"), dashboard.run_id("b")
    open_metrics(page, dashboard, "a", f"?overlay={b}")
    # Both runs' raw traces (run a's own chart may be drawn before the overlay's data comes).
    fig = wait_chart(page, sid("entropy"), " && ".join(
        f"gd.data.some(t => t.meta && t.meta.run === {r} && t.meta.role === 'raw')"
        for r in (a, b)))
    colour_a = page.eval_on_selector(f"[data-run-id='{a}'] input[type=color]", "e => e.value")
    colour_b = page.eval_on_selector(f"[data-run-id='{b}'] input[type=color]", "e => e.value")
    assert colour_a != colour_b
    assert trace(fig, a, "raw")["color"] == colour_a
    assert trace(fig, b, "raw")["color"] == colour_b
    assert trace(fig, b, "raw")["y"] == [2.0, 3.0, 4.0, 5.0, 6.0, 7.0]

    # A new colour is saved on the server (CSRF-protected PATCH) and kept across pages.
    page.eval_on_selector(f"[data-run-id='{b}'] input[type=color]",
                          "e => { e.value = '#123456'; e.dispatchEvent(new Event('input')); "
                          "e.dispatchEvent(new Event('change')); }")
    wait_chart(page, sid("entropy"), "gd.data.some(t => t.line && t.line.color === '#123456')")
    deadline = time.monotonic() + 5
    while dashboard.get(f"/api/runs/{b}")["color"] != "#123456":
        assert time.monotonic() < deadline, "colour not saved"
        time.sleep(0.1)
    page.goto(f"{dashboard.url}/")
    page.wait_for_selector(f"tr[data-run-id='{b}'] input[type=color]")
    page.wait_for_function(
        f"document.querySelector(\"tr[data-run-id='{b}'] input[type=color]\").value === '#123456'")


def test_normalize_maps_declared_ranges_onto_unit_interval(page, dashboard):
    dashboard.post([{"v": 1, "id": "start", "type": "run.start", "run": "n", "environments": ENVS}]
                   + [samples("n", s, [0.0, 2.0, 0.5, 1.5][: 2 + s % 3] + [2.0] * s)
                      for s in range(6)])
    open_metrics(page, dashboard, "n")
    mean = series_id("reward", "reward", "mean", None)
    page.locator(f"[data-series-id='{mean}']").scroll_into_view_if_needed()
    fig = wait_chart(page, mean)
    raw = next(t for t in fig["data"] if t["meta"]["role"] == "raw")
    assert max(raw["y"]) > 1.0  # raw rewards use the 0..2 scale
    assert sorted(set(fig["layout"]["shapes"])) == [0.0, 2.0]  # declared bounds drawn
    page.check("input[name=normalize]")
    fig = wait_chart(page, mean, "gd.layout.shapes.length === 0")
    norm = next(t for t in fig["data"] if t["meta"]["role"] == "raw")
    assert norm["y"] == pytest.approx([v / 2.0 for v in raw["y"]])
    assert all(0.0 <= v <= 1.0 for v in norm["y"])
    lo, hi = fig["layout"]["yaxis"]["range"]
    assert lo <= 0.0 and hi >= 1.0


def ema_expected(values: list[float], span: int, accept: list[bool]) -> list[float | None]:
    alpha, state, out = 2 / (span + 1), None, []
    for v, ok in zip(values, accept, strict=True):
        if ok:
            state = v if state is None else alpha * v + (1 - alpha) * state
        out.append(state)
    return out


def test_ema_and_ignore_outliers_change_what_is_drawn(page, dashboard):
    values = [5.0, 1.0, 1.2, 0.9, 1.1, 100.0, 1.0, 1.3]
    dashboard.post([step("e", n, {"loss/total": v}) for n, v in enumerate(values)])
    open_metrics(page, dashboard, "e")
    key = sid("loss/total")
    wait_chart(page, key)
    page.check("input[name=ema]")
    page.fill("input[name=span]", "3")
    page.press("input[name=span]", "Enter")
    page.locator("input[name=span]").dispatch_event("change")
    # EMA is on by default (span 10): wait until the redraw with span 3 (α = 0.5) is in.
    fig = wait_chart(page, key, "gd.data.some(t => t.meta.role === 'ema'"
                                " && Math.abs(t.y[1] - 3.0) < 1e-9)")
    ema = next(t for t in fig["data"] if t["meta"]["role"] == "ema")
    raw = next(t for t in fig["data"] if t["meta"]["role"] == "raw")
    assert ema["y"] == pytest.approx(ema_expected(values, 3, [True] * len(values)))
    assert raw["opacity"] < 1  # the raw line goes faint under the EMA
    # Telescope's autoscale over what is drawn (0.9..100): pad max(10% of 99.1, 5% of 100).
    assert fig["layout"]["yaxis"]["range"] == pytest.approx([0.9 - 9.91, 100 + 9.91])

    # Ignore outliers: 100 is beyond Q3 + 6 IQR, so the EMA skips it and the y-range excludes it,
    # but the raw line still draws it.
    card = page.locator(".chart", has=page.locator(f"[data-series-id='{key}']"))
    card.get_by_role("button", name="Settings of total").click()
    card.get_by_label("Ignore outliers").check()
    fig = wait_chart(page, key, "gd.layout.yaxis.range[1] < 100")
    ema = next(t for t in fig["data"] if t["meta"]["role"] == "ema")
    raw = next(t for t in fig["data"] if t["meta"]["role"] == "raw")
    accept = [v != 100.0 for v in values]
    assert ema["y"] == pytest.approx(ema_expected(values, 3, accept))
    assert raw["y"] == values
    lo, hi = fig["layout"]["yaxis"]["range"]
    assert hi < 100 and lo < 0.9 and hi > 5.0

    # Ignore first step: the first point is gone and the EMA is seeded with the second value.
    card.get_by_label("Ignore first step").check()
    fig = wait_chart(page, key, "gd.data.find(t => t.meta.role === 'raw').x[0] === 1")
    ema = next(t for t in fig["data"] if t["meta"]["role"] == "ema")
    assert ema["y"][0] == pytest.approx(1.0)
    assert ema["y"] == pytest.approx(ema_expected(values[1:], 3, accept[1:]))

    # Page and chart settings survive a reload.
    page.reload()
    fig = wait_chart(page, key, "gd.data.some(t => t.meta.role === 'ema')")
    assert page.is_checked("input[name=ema]")
    assert page.input_value("input[name=span]") == "3"
    assert fig["data"][0]["x"][0] == 1


def test_timing_charts_ignore_the_first_step_by_default(page, dashboard):
    dashboard.post([step("t", n, {"timing_step_total": 60.0 if n == 0 else 10.0 + n})
                    for n in range(5)])
    open_metrics(page, dashboard, "t")
    fig = wait_chart(page, sid("timing_step_total"))
    raw = next(t for t in fig["data"] if t["meta"]["role"] == "raw")
    assert raw["x"] == [1, 2, 3, 4]


def test_time_axis_starts_at_the_end_of_the_first_step(page, dashboard):
    t0 = 1_700_000_000.0
    dashboard.post([step("x", n, {"entropy": 1.0}, time=t0 + 30.0 * n) for n in range(4)])
    open_metrics(page, dashboard, "x")
    wait_chart(page, sid("entropy"))
    page.check("input[value=time]")
    fig = wait_chart(page, sid("entropy"), "gd.layout.xaxis.ticksuffix === ' s'")
    raw = next(t for t in fig["data"] if t["meta"]["role"] == "raw")
    assert raw["x"] == [0, 30, 60, 90]
    page.fill("input[name=maxStep]", "2")
    page.locator("input[name=maxStep]").dispatch_event("change")
    fig = wait_chart(page, sid("entropy"), "gd.data[0].x.length === 3")


def test_search_filters_charts_by_name_or_regex(page, dashboard):
    dashboard.post([step("s", 0, {k: 1.0 for k in KEYS})])
    open_metrics(page, dashboard, "s")
    wait_chart(page, sid("entropy"))
    page.fill("input[name=search]", "loss")
    page.wait_for_function("document.querySelectorAll('.chart:not([hidden])').length === 2")
    assert section_titles(page) == ["loss"]
    page.check("input[name=regex]")
    page.fill("input[name=search]", "^(entropy|grad_norm)$")
    page.wait_for_function("document.querySelector('.search-count').textContent === '2 charts'"
                           " && !document.querySelector('[data-section=general]').hidden")
    assert section_titles(page) == ["General"]
    page.fill("input[name=search]", "([")
    page.wait_for_selector("input[name=search][aria-invalid=true]")


def test_a_page_with_300_charts_only_renders_what_is_near(page, dashboard):
    keys = [f"s{i // 60}/g{(i // 10) % 6}/m{i}" for i in range(300)]
    dashboard.post([step("big", n, {k: math.sin(n + i) for i, k in enumerate(keys)})
                    for n in range(30)])
    open_metrics(page, dashboard, "big")
    wait_chart(page, sid(keys[0]))
    assert page.eval_on_selector_all(".chart", "els => els.length") == 300
    wait_drawn_near(page)
    rendered = page.eval_on_selector_all(".chart.rendered", "els => els.length")
    assert 0 < rendered < 60
    page.evaluate("window.scrollTo(0, document.body.scrollHeight)")
    wait_chart(page, sid(keys[-1]))
    page.wait_for_function(  # released far from the viewport
        "sid => !document.querySelector(`[data-series-id=\"${CSS.escape(sid)}\"]`).data",
        arg=sid(keys[0]))
    wait_drawn_near(page)
    assert chart_data(page, sid(keys[0])) is None
    assert page.eval_on_selector_all(".chart.rendered", "els => els.length") < 60


HOSTILE = "<img src=x onerror=alert(1)>"


def test_a_hostile_key_and_run_name_render_as_text(page, dashboard):
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    dashboard.post([step(HOSTILE, n, {HOSTILE: float(n), f"{HOSTILE}/x": 1.0}) for n in range(3)])
    open_metrics(page, dashboard, HOSTILE)
    fig = wait_chart(page, sid(HOSTILE))
    titles = page.eval_on_selector_all(".chart-title", "els => els.map(e => e.textContent)")
    assert HOSTILE in titles
    assert HOSTILE in section_titles(page)
    assert page.text_content("h1") == HOSTILE
    # Hover shows the run name in Plotly's tooltip: as text, escaped for Plotly.
    page.locator(f"[data-series-id='{sid(HOSTILE)}'] .nsewdrag").first.hover()
    label = page.wait_for_selector(f"[data-series-id='{sid(HOSTILE)}'] .hoverlayer .legend")
    assert HOSTILE in label.text_content()  # the name as text: no element was made of it
    assert fig["data"][0]["name"] == "&lt;img src=x onerror=alert(1)&gt;"
    assert page.eval_on_selector_all("img", "els => els.length") == 0
    page.goto(f"{dashboard.url}/")
    page.wait_for_function("name => [...document.querySelectorAll('tr[data-run-id] .run-name a')]"
                           ".some(a => a.textContent === name)", arg=HOSTILE)
    assert page.eval_on_selector_all("img", "els => els.length") == 0
    assert dialogs == []


def test_empty_run_shows_how_to_send_metrics(page, dashboard):
    dashboard.post({"v": 1, "id": "s", "type": "run.start", "run": "empty"})
    open_metrics(page, dashboard, "empty")
    page.wait_for_selector("#empty:not([hidden])")
    text = page.text_content("#empty")
    assert "telescope token browser" in text  # the command every install has
    # The first step replaces the help with its chart, live.
    dashboard.post(step("empty", 0, {"entropy": 1.0}))
    wait_chart(page, sid("entropy"))
    assert page.is_hidden("#empty")


def test_screenshots_of_the_main_pages(browser, dashboard):
    from ingest.write.demo import demo_messages

    messages = list(demo_messages("grpo-demo", 120))
    for i in range(0, len(messages), 100):
        dashboard.post(messages[i:i + 100])
    dashboard.post(list(demo_messages("grpo-baseline", 80, seed=3)))
    a, b = dashboard.run_id("grpo-demo"), dashboard.run_id("grpo-baseline")
    ARTIFACTS.mkdir(exist_ok=True)
    errors: list[Any] = []  # uncaught errors of the page
    for scheme in ("light", "dark"):
        ctx = browser.new_context(viewport={"width": 1400, "height": 900}, color_scheme=scheme)
        pg = ctx.new_page()
        pg.on("pageerror", lambda exc: errors.append(exc))  # noqa: B023 (one list for all)
        pg.goto(f"{dashboard.url}/runs/{a}/metrics?overlay={b}")
        pg.check("input[name=ema]")
        wait_chart(pg, series_id("step", "entropy"), "gd.data.length >= 4")
        pg.wait_for_timeout(800)
        pg.screenshot(path=str(ARTIFACTS / f"metrics-{scheme}.png"))
        # What the picture must show: drawn charts with both runs named, no error.
        shown = pg.evaluate("""() => [...document.querySelectorAll('.chart.rendered')]
            .filter((c) => { const r = c.getBoundingClientRect();
                             return r.bottom > 0 && r.top < innerHeight; })
            .map((c) => ({ traces: c.querySelector('.js-plotly-plot')?.data?.length ?? 0,
                           runs: [...c.querySelectorAll('.run-legend .run-item')]
                             .map((li) => li.textContent) }))""")
        assert len(shown) >= 4, shown
        assert all(c["traces"] >= 2 for c in shown), shown
        assert any(c["runs"] == ["grpo-demo", "grpo-baseline"] for c in shown), shown
        assert pg.is_hidden("#empty") and not errors, errors
        pg.locator("[data-section='fixed:Reward']").scroll_into_view_if_needed()
        pg.evaluate("document.querySelector(\"[data-section='fixed:Reward']\").scrollIntoView()")
        pg.wait_for_timeout(1200)
        pg.screenshot(path=str(ARTIFACTS / f"metrics-reward-{scheme}.png"))
        pg.goto(f"{dashboard.url}/")
        pg.wait_for_selector("tr[data-run-id]")
        pg.screenshot(path=str(ARTIFACTS / f"runs-{scheme}.png"))
        ctx.close()


def test_zooming_fetches_finer_points(page, dashboard):
    n = 3000
    for first in range(0, n, 500):
        dashboard.post([step("z", s, {"entropy": math.sin(s / 7)})
                        for s in range(first, first + 500)])
    open_metrics(page, dashboard, "z")
    key = sid("entropy")
    fig = wait_chart(page, key)
    raw = next(t for t in fig["data"] if t["meta"]["role"] == "raw")
    assert len(raw["x"]) < n  # a downsampled overview, with its extremes band
    assert any(t["meta"]["role"] == "extremes" for t in fig["data"])
    inside = [x for x in raw["x"] if 1000 <= x <= 1100]
    assert len(inside) < 101
    page.evaluate(f"Plotly.relayout(document.querySelector('[data-series-id=\"{key}\"]'),"
                  " {'xaxis.range': [1000, 1100]})")
    fig = wait_chart(page, key, "gd.data.find(t => t.meta.role === 'raw').x"
                     ".filter(x => x >= 1000 && x <= 1100).length === 101")
    raw = next(t for t in fig["data"] if t["meta"]["role"] == "raw")
    assert [x for x in raw["x"] if 1000 <= x <= 1100] == list(range(1000, 1101))
    assert raw["y"][raw["x"].index(1050)] == pytest.approx(math.sin(1050 / 7))
    assert raw["x"][0] == 0 and raw["x"][-1] == n - 1  # coarse points outside the window
    # Double-click (autorange) returns to the overview.
    page.evaluate(f"Plotly.relayout(document.querySelector('[data-series-id=\"{key}\"]'),"
                  " {'xaxis.autorange': true})")
    wait_chart(page, key, "gd.data.find(t => t.meta.role === 'raw').x"
               ".filter(x => x >= 1000 && x <= 1100).length < 101")


def test_csv_and_png_export(page, dashboard):
    dashboard.post([step("x", n, {"loss/total": 0.5 * n}) for n in range(4)])
    open_metrics(page, dashboard, "x")
    key = sid("loss/total")
    wait_chart(page, key)
    card = page.locator(".chart", has=page.locator(f"[data-series-id='{key}']"))
    with page.expect_download() as info:
        card.get_by_role("button", name="Download CSV of total").click()
    download = info.value
    assert download.suggested_filename == "loss_total.csv"
    lines = Path(download.path()).read_text().splitlines()
    assert lines[0] == "run,step,time,value"
    assert [line.split(",")[1:4:2] for line in lines[1:]] == [["0", "0"], ["1", "0.5"],
                                                               ["2", "1"], ["3", "1.5"]]
    with page.expect_download() as info:
        card.get_by_role("button", name="Download PNG of total").click()
    png = Path(info.value.path()).read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000


def test_sections_collapse_from_the_keyboard_and_stay_collapsed(page, dashboard):
    dashboard.post([step("k", 0, {"entropy": 1.0, "loss/kl": 2.0})])
    open_metrics(page, dashboard, "k")
    wait_chart(page, sid("entropy"))
    toggle = page.locator("[data-section='user:loss'] .section-toggle")
    toggle.focus()
    page.keyboard.press("Enter")
    assert toggle.get_attribute("aria-expanded") == "false"
    assert page.is_hidden("[data-section='user:loss'] .section-body")
    page.reload()
    page.wait_for_selector("[data-section='user:loss'] .section-toggle[aria-expanded='false']")
    page.keyboard.press("Tab")  # the page's controls are reachable by keyboard
    assert page.evaluate("document.activeElement.tagName") in ("A", "INPUT", "BUTTON", "SELECT")
