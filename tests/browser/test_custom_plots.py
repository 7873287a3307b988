"""Plots of the Custom view in Chromium: several series in one plot (metrics, environments),
each on its own axis side when scales differ; a layout saved before sections existed, shown
migrated; a plot of metrics the runs do not have yet; saving on leaving, never over a newer
dashboard."""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.conftest import step
from tests.browser.test_custom_view import (
    board,
    card,
    node,
    open_custom,
    plot,
    put_layout,
    section,
    stored,
)

pytestmark = pytest.mark.browser

KL_MEAN, KL_MAX = "step|train%2Fkl_mean||", "step|train%2Fkl_max||"
MEAN_CD, MEAN_MATH = "reward|reward|mean|countdown", "reward|reward|mean|math"


def samples(run: str, n: int, env: str, rewards: list[float]) -> dict[str, Any]:
    k = len(rewards)
    return {"v": 1, "id": f"{run}-samples-{n}-{env}", "type": "samples", "run": run, "step": n,
            "env": env, "sample_id": [f"{env}-{n}-{i}" for i in range(k)],
            "group_id": [f"{env}-{n}-g{i // 2}" for i in range(k)], "reward": rewards}


def figure(pg, pid: str, traces: int) -> Any:
    """The Plotly figure of plot `pid` once it draws `traces` lines (raw role)."""
    sel = f"{node(pid)} .plot"
    pg.wait_for_function("""([sel, n]) => { const gd = document.querySelector(sel);
        return !!(gd && gd.data && gd.data.filter(t => t.meta?.role === 'raw').length === n); }""",
                         arg=[sel, traces])
    return pg.evaluate("""(sel) => { const gd = document.querySelector(sel);
        return {raw: gd.data.filter(t => t.meta.role === 'raw').map(t => ({series: t.meta.series,
                  y: Array.from(t.y), yaxis: t.yaxis || 'y', color: t.line.color, name: t.name})),
                y2: gd.layout.yaxis2 ? {side: gd.layout.yaxis2.side, range: gd.layout.yaxis2.range}
                  : null,
                y: {range: gd.layout.yaxis.range, type: gd.layout.yaxis.type}}; }""", sel)


def add_series(pg, pid: str, sid: str, axis: str = "auto") -> None:
    if pg.locator(f"{node(pid)} .plot-form").count() == 0:
        pg.click(f"{node(pid)} [data-tool='Add series']")
    pg.select_option(f"{node(pid)} .plot-form select[name=series]", sid)
    pg.select_option(f"{node(pid)} .plot-form select[name=axis]", axis)
    pg.click(f"{node(pid)} .plot-form button[type=submit]")


def test_a_plot_draws_several_series_each_on_its_axis_side(page, dashboard):
    dashboard.post([step("m1", n, {"train/kl_mean": 0.01 * (n + 1), "train/kl_max": 1.0 + n})
                    for n in range(4)]
                   + [samples("m1", n, env, [r + n, r + n + 1])
                      for n in range(4) for env, r in (("countdown", 0.0), ("math", 10.0))])
    run_id = open_custom(page, dashboard, "m1", {"version": 2, "sections": [
        section("s1", "Policy", {**plot("p1", "train/kl_mean"), "series": [
            {"id": KL_MEAN, "axis": "auto"}]})]})
    fig = figure(page, "p1", 1)
    assert page.text_content(f"{node('p1')} .chart-title") == "KL to reference (mean)"

    add_series(page, "p1", KL_MAX)  # a hundred times larger: its own axis, on the right
    fig = figure(page, "p1", 2)
    assert [(t["series"], t["yaxis"]) for t in fig["raw"]] == [(KL_MEAN, "y"), (KL_MAX, "y2")]
    assert fig["raw"][1]["y"] == [1.0, 2.0, 3.0, 4.0]
    assert fig["raw"][0]["color"] != fig["raw"][1]["color"]  # one run: a colour per series
    assert fig["y2"]["side"] == "right" and fig["y2"]["range"][1] >= 4 > fig["y"]["range"][1]
    assert page.text_content(f"{node('p1')} .chart-title") == \
        "KL to reference (mean), KL to reference (max)"
    assert page.get_attribute(f"{node('p1')} .plot-series li[data-series='{KL_MAX}']",
                              "data-side") == "right"
    # Both on the left when asked (the axis button goes auto → left → right).
    page.click(f"{node('p1')} .plot-series li[data-series='{KL_MAX}'] button.axis")
    page.wait_for_function(f"""document.querySelector("{node('p1')} .plot").data
        .filter(t => t.meta.role === 'raw').every(t => (t.yaxis || 'y') === 'y')""")
    page.click(f"{node('p1')} [data-tool='Rename']")
    page.keyboard.type("KL")
    page.keyboard.press("Enter")

    # Reward mean of two environments in one plot: same scale, one axis.
    page.fill(".palette-search", "reward")
    page.click(f".palette-item[data-metric-id='{MEAN_CD}'] button.add")
    add_series(page, "p2", MEAN_MATH)
    fig = figure(page, "p2", 2)
    assert [(t["series"], t["yaxis"], t["y"]) for t in fig["raw"]] == [
        (MEAN_CD, "y", [0.5, 1.5, 2.5, 3.5]), (MEAN_MATH, "y", [10.5, 11.5, 12.5, 13.5])]
    assert page.text_content(f"{node('p2')} .chart-title") == \
        "Reward mean · countdown, Reward mean · math"
    add_series(page, "p2", KL_MEAN)  # the same series in a second plot
    figure(page, "p2", 3)
    page.click(f"{node('p2')} .plot-series li[data-series='{MEAN_MATH}'] "
               "button[aria-label^='Remove']")
    figure(page, "p2", 2)

    want = [{"id": KL_MEAN, "axis": "auto"}, {"id": KL_MAX, "axis": "left"}]
    page.wait_for_function("document.querySelector('.save-status').textContent === 'Saved'")
    got = dashboard.get(f"/api/runs/{run_id}/layout")["sections"][0]["items"]
    assert (got[0]["title"], got[0]["series"]) == ("KL", want)
    assert [s["id"] for s in got[1]["series"]] == [MEAN_CD, KL_MEAN]
    page.reload()  # a reload keeps titles, series and sides
    fig = figure(page, "p1", 2)
    assert [t["yaxis"] for t in fig["raw"]] == ["y", "y"]
    assert page.text_content(f"{node('p1')} .chart-title") == "KL"
    assert [t["series"] for t in figure(page, "p2", 2)["raw"]] == [MEAN_CD, KL_MEAN]


def test_a_layout_saved_before_sections_opens_as_one_section(page, dashboard):
    dashboard.post([step("o1", n, {"entropy": 1.0 + n, "grad_norm": 2.0 + n, "kl": 0.1})
                    for n in range(3)])
    # What the previous version stored: a list of charts, straight in the database.
    v1 = [{"id": "step|grad_norm||", "wide": True, "settings": {"logY": True}},
          {"id": "step|entropy||", "wide": False, "settings": {}}]
    dashboard.server.state.manage("shell", "-c", (
        "from ingest.models import Project; from telescope_ui.models import Layout; "
        f"Layout.objects.create(project=Project.objects.get(name='browser'), name='default', "
        f"charts={v1!r})"))
    run_id = open_custom(page, dashboard, "o1")
    page.wait_for_selector(card("Entropy"))
    assert board(page) == [["Charts", ["Gradient norm", "Entropy"]]]
    assert "wide" in page.get_attribute(card("Gradient norm"), "class")
    page.wait_for_function(f"""document.querySelector("{card_css('step|grad_norm||')}")
        ?.layout?.yaxis?.type === 'log'""")
    # The first edit saves it as version 2.
    page.focus(f"{card('Entropy')} [data-tool='Move earlier']")
    page.keyboard.press("Enter")
    assert stored(dashboard, run_id, page) == [["Charts", ["entropy", "grad_norm"]]]
    raw = dashboard.get(f"/api/runs/{run_id}/layout")["sections"][0]["items"][1]
    assert raw["wide"] is True and raw["settings"] == {"logY": True}


def card_css(sid: str) -> str:
    return f".board .chart .plot[data-series-id='{sid}']"


def test_a_plot_of_metrics_not_there_yet_appears_when_they_arrive(page, dashboard):
    dashboard.post([step("l1", 0, {"entropy": 1.0})])
    open_custom(page, dashboard, "l1", {"version": 2, "sections": [
        section("s1", "Main", plot("p1", "entropy"), plot("p2", "drift", "drift_max"))]})
    page.wait_for_selector(f"{node('p2')}.missing")
    assert page.text_content(f"{node('p2')} .chart-note") == "Not in the runs shown (yet)."
    assert page.text_content(f"{node('p2')} .chart-title") == "drift, drift_max"
    trainer = dashboard.ingest_socket()
    try:
        trainer.send(step("l1", 1, {"entropy": 2.0, "drift": 0.25}))
    finally:
        trainer.close()
    fig = figure(page, "p2", 1)  # drift drawn; drift_max still to come
    assert fig["raw"][0]["y"] == [0.25]
    assert page.locator(f"{node('p2')}.missing").count() == 0
    missing = page.get_attribute(f"{node('p2')} .plot-series li[data-series='step|drift_max||']",
                                 "class")
    assert "missing" in missing
    assert page.is_visible(f"{node('p2')} .plot-series")  # which one is missing, said


def test_edits_are_saved_before_leaving_and_never_overwrite_a_newer_dashboard(page, dashboard):
    dashboard.post([step("s1", n, {"entropy": 1.0 + n, "grad_norm": 2.0 + n}) for n in range(3)])
    run_id = open_custom(page, dashboard, "s1", {"version": 2, "sections": [
        section("s1", "Main", plot("p1", "grad_norm"))]})
    page.wait_for_selector(card("Gradient norm"))
    # An edit in the last moment before switching views is saved, not dropped.
    page.click(f"{card('Gradient norm')} [data-tool='Toggle wide']")
    page.click(".view-tabs a[data-view='all']")
    page.wait_for_url(lambda url: url.endswith("view=all"))
    assert dashboard.get(f"/api/runs/{run_id}/layout")["sections"][0]["items"][0]["wide"] is True

    # Another page saves meanwhile: this page's next edit is refused and says so.
    open_custom(page, dashboard, "s1")
    page.wait_for_selector(card("Gradient norm"))
    put_layout(page, run_id, {"version": 2, "sections": []})
    page.fill(".palette-search", "entropy")
    page.click(".palette-item[data-metric-id='step|entropy||'] button.add")
    page.wait_for_function(
        "document.querySelector('.save-status').textContent.includes('changed elsewhere')")
    assert dashboard.get(f"/api/runs/{run_id}/layout")["sections"] == []
