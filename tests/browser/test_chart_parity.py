"""Chart parity with Telescope in Chromium: the autoscaled y-range, the Max
time control's durations, the Ctrl-hover cursor synced across charts, the run legend with its
dimming, the dot on each run's last point, badges of changed settings, and a composed chart's
legend choices kept across a reload."""

from __future__ import annotations

from typing import Any

import pytest

from ingest.core.series_ids import series_id
from tests.browser.conftest import step, wait_chart
from tests.browser.test_metrics_page import open_metrics
from tests.browser.test_normalize import REWARDS, post_run

pytestmark = pytest.mark.browser

ENTROPY, LOSS = series_id("step", "entropy"), series_id("step", "loss")
TIMING = series_id("step", "timing_step_total")
MEAN = series_id("reward", "reward", "mean", None)
DIM = 0.15  # static/js/charts/legend.js


def card(pg, sid: str):
    return pg.locator(".chart", has=pg.locator(f"[data-series-id='{sid}']"))


def drawn_range(pg, sid: str) -> list[float]:
    """The y-range Plotly drew (its full layout, after it settled the axis)."""
    return pg.evaluate(
        """sid => Array.from(document.querySelector(`[data-series-id="${CSS.escape(sid)}"]`)
        ._fullLayout.yaxis.range)""", sid)


def point_at(pg, sid: str, x: float, y: float) -> dict[str, float]:
    """Page coordinates of data point (x, y) in the chart of `sid`."""
    return pg.evaluate(
        """([sid, x, y]) => {
        const gd = document.querySelector(`[data-series-id="${CSS.escape(sid)}"]`);
        const fl = gd._fullLayout, r = gd.getBoundingClientRect();
        return {x: r.left + fl.xaxis._offset + fl.xaxis.l2p(x),
                y: r.top + fl.yaxis._offset + fl.yaxis.l2p(y)}; }""", [sid, x, y])


def hovered_x(pg, sid: str) -> Any:
    """The x of the hover a chart shows (None when it shows none)."""
    return pg.evaluate(
        """sid => { const gd = document.querySelector(`[data-series-id="${CSS.escape(sid)}"]`);
        const shown = gd.querySelector('.hoverlayer').childElementCount > 0;
        return shown && gd._hoverdata && gd._hoverdata.length ? gd._hoverdata[0].x : null; }""",
        sid)


def opacities(pg, sid: str) -> list[tuple[int, str, float]]:
    return pg.evaluate(
        """sid => document.querySelector(`[data-series-id="${CSS.escape(sid)}"]`).data
        .map(t => [t.meta.run, t.meta.role, t.opacity ?? 1])""", sid)


def badges(pg, sid: str) -> list[str]:
    return card(pg, sid).locator("[data-setting-badges] .setting-badge").all_text_contents()


def test_the_y_range_follows_telescopes_autoscale_and_advantage_includes_zero(page, dashboard):
    dashboard.post([step("auto", n, {"entropy": v}) for n, v in enumerate([2.0, 4.0, 3.0])]
                   + [{"v": 1, "id": f"auto-s{n}", "type": "samples", "run": "auto", "step": n,
                       "sample_id": [f"{n}a", f"{n}b"], "group_id": [f"g{n}", f"g{n}"],
                       "reward": [1.0, 0.0], "advantage": [1.0, 2.0]} for n in range(3)])
    run_id = open_metrics(page, dashboard, "auto")
    wait_chart(page, ENTROPY)
    # pad = max(10% of 4 − 2, 5% of |4|, 1e-10) = 0.2 on both sides: not Plotly's own autorange.
    assert drawn_range(page, ENTROPY) == pytest.approx([1.8, 4.2])

    # Every advantage is positive, yet zero is in the range; the band (mean 1.5 ± 0.7071) and
    # the envelope (1..2) count too: [0, 2.2071] padded by 0.22071.
    adv = next(e["id"] for e in dashboard.get(f"/api/runs/{run_id}/catalog")["series"]
               if e["kind"] == "advantage" and e["stat"] == "mean" and e["env"] is None)
    page.locator(f"[data-series-id='{adv}']").scroll_into_view_if_needed()
    wait_chart(page, adv, "gd.data.some(t => t.meta.role === 'band')"
                          " && gd.data.some(t => t.meta.role === 'envelope')")
    hi = 1.5 + 0.5 ** 0.5
    assert drawn_range(page, adv) == pytest.approx([-0.1 * hi, 1.1 * hi])


def test_max_time_takes_a_duration_and_refuses_anything_else(page, dashboard):
    t0 = 1_700_000_000.0
    dashboard.post([step("dur", n, {"entropy": 1.0 + n}, time=t0 + 1800.0 * n) for n in range(6)])
    open_metrics(page, dashboard, "dur")
    wait_chart(page, ENTROPY, "gd.data[0].x.length === 6")
    box = page.locator("input[name=maxTime]")
    assert box.get_attribute("type") == "text"
    box.fill("1h30m")  # steps every 30 min, time 0 at step 0: steps 0..3
    box.press("Tab")
    fig = wait_chart(page, ENTROPY, "gd.data.find(t => t.meta.role === 'raw').x.length === 4")
    assert next(t for t in fig["data"] if t["meta"]["role"] == "raw")["x"] == [0, 1, 2, 3]
    assert box.get_attribute("aria-invalid") == "false"

    # Not a duration: flagged, the accepted forms named, and the charts keep the last limit.
    box.fill("1h30")
    box.press("Tab")
    page.wait_for_selector("input[name=maxTime][aria-invalid=true]")
    message = page.locator("#max-time-error").text_content()
    assert all(form in message for form in ("90m", "1h30m", "2d", "45s", "1.5h", "hours"))
    assert page.evaluate("window.telescope.settings.maxTime") == pytest.approx(1.5)
    fig = wait_chart(page, ENTROPY)
    assert next(t for t in fig["data"] if t["meta"]["role"] == "raw")["x"] == [0, 1, 2, 3]

    # A bare number is hours (what the control took before); typing again clears the flag.
    box.fill("1")
    page.wait_for_selector("input[name=maxTime][aria-invalid=false]")
    box.press("Tab")
    wait_chart(page, ENTROPY, "gd.data.find(t => t.meta.role === 'raw').x.length === 3")

    # The limit survives a reload, written as a duration.
    box.fill("45m")
    box.press("Tab")
    wait_chart(page, ENTROPY, "gd.data.find(t => t.meta.role === 'raw').x.length === 2")
    page.reload()
    wait_chart(page, ENTROPY, "gd.data.find(t => t.meta.role === 'raw').x.length === 2")
    assert page.input_value("input[name=maxTime]") == "45m"


def test_ctrl_hover_shows_the_same_step_on_every_other_chart(page, dashboard):
    t0 = 1_700_000_000.0
    dashboard.post([step("cur", n, {"entropy": 1.0 + n, "loss": 5.0 - n}, time=t0 + 20.0 * n)
                    for n in range(5)])
    open_metrics(page, dashboard, "cur")
    wait_chart(page, ENTROPY)
    wait_chart(page, LOSS)

    # Without Ctrl, a hover stays on its own chart.
    at = point_at(page, ENTROPY, 1, 2.0)
    page.mouse.move(at["x"], at["y"])
    page.wait_for_function(
        f"document.querySelector(`[data-series-id='{ENTROPY}']`)._hoverdata?.[0]?.x === 1")
    assert hovered_x(page, LOSS) is None

    # Ctrl held: the other chart shows its hover at the same step, and follows the pointer.
    page.keyboard.down("Control")
    at = point_at(page, ENTROPY, 2, 3.0)
    page.mouse.move(at["x"], at["y"])
    page.wait_for_function(f"""(() => {{
        const gd = document.querySelector(`[data-series-id='{LOSS}']`);
        return gd._hoverdata && gd._hoverdata[0].x === 2
            && gd.querySelector('.hoverlayer').childElementCount > 0; }})()""")
    assert hovered_x(page, LOSS) == 2
    at = point_at(page, ENTROPY, 3, 4.0)
    page.mouse.move(at["x"], at["y"])
    page.wait_for_function(
        f"document.querySelector(`[data-series-id='{LOSS}']`)._hoverdata?.[0]?.x === 3")

    # Releasing Ctrl clears it.
    page.keyboard.up("Control")
    page.wait_for_function(f"""document.querySelector(`[data-series-id='{LOSS}']`)
        .querySelector('.hoverlayer').childElementCount === 0""")
    assert hovered_x(page, ENTROPY) == 3  # the chart under the pointer keeps its own

    # On the time axis the cursor is the same time (here 40 s: step 2).
    page.mouse.move(0, 0)
    page.check("input[value=time]")
    wait_chart(page, ENTROPY, "gd.layout.xaxis.ticksuffix === ' s'")
    wait_chart(page, LOSS, "gd.layout.xaxis.ticksuffix === ' s'")
    page.keyboard.down("Control")
    at = point_at(page, ENTROPY, 40, 3.0)
    page.mouse.move(at["x"], at["y"])
    page.wait_for_function(
        f"document.querySelector(`[data-series-id='{LOSS}']`)._hoverdata?.[0]?.x === 40")
    page.keyboard.up("Control")


def test_overlaid_runs_are_named_and_hovering_one_dims_the_others(page, dashboard):
    dashboard.post([step("la", n, {"entropy": 1.0 + n}) for n in range(4)]
                   + [step("lb", n, {"entropy": 10.0 + n}) for n in range(4)])
    a, b = dashboard.run_id("la"), dashboard.run_id("lb")
    open_metrics(page, dashboard, "la", f"?overlay={b}")
    wait_chart(page, ENTROPY, "gd.data.filter(t => t.meta.role === 'raw').length === 2")
    legend = card(page, ENTROPY).locator("[data-run-legend]")
    assert legend.is_visible()
    items = legend.locator("li")
    assert items.all_text_contents() == ["la", "lb"]
    colours = {r["id"]: r["color"] for r in dashboard.get("/api/runs")["runs"]}
    swatches = legend.locator(".run-swatch").evaluate_all(
        "els => els.map(e => getComputedStyle(e).backgroundColor)")
    rgb = [f"rgb({int(c[1:3], 16)}, {int(c[3:5], 16)}, {int(c[5:7], 16)})"
           for c in (colours[a], colours[b])]
    assert swatches == rgb
    drawn = opacities(page, ENTROPY)
    assert all(o == 1 for _, _, o in drawn)

    # Hovering run lb's legend item dims la's traces (its dot too) and leaves lb's as drawn.
    items.nth(1).hover()
    page.wait_for_function(f"""document.querySelector(`[data-series-id='{ENTROPY}']`).data
        .some(t => t.meta.run === {a} && t.opacity < 1)""")
    for run, _, o in opacities(page, ENTROPY):
        assert o == (pytest.approx(DIM) if run == a else 1)
    page.mouse.move(0, 0)
    page.wait_for_function(f"""document.querySelector(`[data-series-id='{ENTROPY}']`).data
        .every(t => (t.opacity ?? 1) === 1)""")

    # Hovering run la's line dims lb's.
    at = point_at(page, ENTROPY, 2, 3.0)
    page.mouse.move(at["x"], at["y"])
    page.wait_for_function(f"""document.querySelector(`[data-series-id='{ENTROPY}']`).data
        .some(t => t.meta.run === {b} && t.opacity < 1)""")
    for run, _, o in opacities(page, ENTROPY):
        assert o == (pytest.approx(DIM) if run == b else 1)
    page.mouse.move(0, 0)
    page.wait_for_function(f"""document.querySelector(`[data-series-id='{ENTROPY}']`).data
        .every(t => (t.opacity ?? 1) === 1)""")

    # One run alone needs no legend.
    open_metrics(page, dashboard, "la")
    wait_chart(page, ENTROPY)
    assert card(page, ENTROPY).locator("[data-run-legend]").is_hidden()


def test_a_dot_marks_each_runs_last_point_and_moves_with_live_points(page, dashboard):
    dashboard.post([step("dot", n, {"entropy": 1.0 + n / 10}) for n in range(5)])
    run_id = open_metrics(page, dashboard, "dot")
    fig = wait_chart(page, ENTROPY, "gd.data.some(t => t.meta.role === 'last')")
    dot = next(t for t in fig["data"] if t["meta"]["role"] == "last")
    assert (dot["x"], dot["y"]) == ([4], [pytest.approx(1.4)])
    assert dot["meta"]["run"] == run_id
    assert page.evaluate(f"""document.querySelector(`[data-series-id='{ENTROPY}']`).data
        .find(t => t.meta.role === 'last').marker.color""") == dashboard.get(
        f"/api/runs/{run_id}")["color"]
    page.evaluate(f"document.querySelector(`[data-series-id='{ENTROPY}']`).__kept = true")
    trainer = dashboard.ingest_socket()
    try:
        trainer.send(step("dot", 5, {"entropy": 0.25}))
    finally:
        trainer.close()
    fig = wait_chart(page, ENTROPY, "gd.data.find(t => t.meta.role === 'last').x[0] === 5")
    assert next(t for t in fig["data"] if t["meta"]["role"] == "last")["y"] == [0.25]
    assert page.evaluate(f"document.querySelector(`[data-series-id='{ENTROPY}']`).__kept") is True


def test_changed_settings_show_as_badges_that_survive_a_reload(page, dashboard):
    dashboard.post([step("bdg", n, {"entropy": 1.0 + n, "timing_step_total": 9.0 - n})
                    for n in range(4)])
    open_metrics(page, dashboard, "bdg")
    wait_chart(page, ENTROPY)
    assert badges(page, ENTROPY) == []
    assert card(page, ENTROPY).locator("[data-setting-badges]").is_hidden()
    c = card(page, ENTROPY)
    c.get_by_role("button", name="Settings of entropy").click()
    c.get_by_label("Log y").check()
    c.get_by_label("y max").fill("5")
    c.get_by_label("y max").dispatch_event("change")
    page.wait_for_function(f"""[...document.querySelectorAll(".chart")].some(c =>
        c.querySelector("[data-series-id='{ENTROPY}']")
        && c.querySelectorAll('.setting-badge').length === 2)""")
    assert badges(page, ENTROPY) == ["log y", "y \u2264 5"]
    # A timing chart ignores its first step by default: showing it is the change.
    wait_chart(page, TIMING)
    t = card(page, TIMING)
    t.get_by_role("button", name="Settings of timing_step_total").click()
    t.get_by_label("Ignore first step").uncheck()
    wait_chart(page, TIMING, "gd.data.find(t => t.meta.role === 'raw').x[0] === 0")
    assert badges(page, TIMING) == ["first step shown"]

    page.reload()
    wait_chart(page, ENTROPY, "gd.layout.yaxis.type === 'log'")
    assert badges(page, ENTROPY) == ["log y", "y \u2264 5"]
    assert badges(page, TIMING) == ["first step shown"]
    # Back to the defaults: no badge.
    c = card(page, ENTROPY)
    c.get_by_role("button", name="Settings of entropy").click()
    c.get_by_label("Log y").uncheck()
    c.get_by_label("y max").fill("")
    c.get_by_label("y max").dispatch_event("change")
    page.wait_for_function(f"""[...document.querySelectorAll(".chart")].some(c =>
        c.querySelector("[data-series-id='{ENTROPY}']")
        && c.querySelector('[data-setting-badges]').hidden)""")
    assert badges(page, ENTROPY) == []


def test_a_composed_charts_env_filter_and_toggles_survive_a_reload(page, dashboard):
    post_run(dashboard, "envr", REWARDS)
    open_metrics(page, dashboard, "envr")
    page.locator(f"[data-series-id='{MEAN}']").scroll_into_view_if_needed()
    wait_chart(page, MEAN, "gd.data.some(t => t.meta.role === 'envelope')")
    legend = card(page, MEAN).locator("[data-chart-legend]")
    legend.get_by_label("Environments of reward").select_option("math")
    legend.get_by_label("min/max").uncheck()
    wait_chart(page, MEAN, "gd.data.every(t => t.meta.env === 'math')"
                           " && !gd.data.some(t => t.meta.role === 'envelope')")
    assert badges(page, MEAN) == ["no min/max", "env: math"]

    page.reload()
    page.locator(f"[data-series-id='{MEAN}']").scroll_into_view_if_needed()
    fig = wait_chart(page, MEAN, "gd.data.every(t => t.meta.env === 'math')")
    assert [t["meta"]["role"] for t in fig["data"]] == ["band", "env", "last"]
    legend = card(page, MEAN).locator("[data-chart-legend]")
    assert legend.get_by_label("Environments of reward").input_value() == "math"
    assert not legend.get_by_label("min/max").is_checked()
    assert legend.get_by_label("± std").is_checked()
    assert badges(page, MEAN) == ["no min/max", "env: math"]
