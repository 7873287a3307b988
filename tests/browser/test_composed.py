"""Composed charts in Chromium: one chart per metric with its mean line, ± std band
and min/max envelope toggled from the chart's legend, environments overlaid and filtered on the
chart, groups counts stacked, data-quality counters in a collapsed section that flags them, and
the demo run's All view within 60 charts."""

from __future__ import annotations

import pytest

from ingest.core.series_ids import series_id
from tests.browser.conftest import ARTIFACTS, step, wait_chart
from tests.browser.test_metrics_page import open_metrics
from tests.browser.test_normalize import REWARDS, post_run

pytestmark = pytest.mark.browser

MEAN = series_id("reward", "reward", "mean", None)
GROUPS = series_id("groups", "groups", "count", None)


# Waits until exactly the charts `ids` are shown (a search is applied as you type).
SHOWN_ARE = ("ids => JSON.stringify([...document.querySelectorAll("
             "'.chart:not([hidden]) [data-series-id]')].map(x => x.dataset.seriesId))"
             " === JSON.stringify(ids)")


def card(pg, sid: str):
    return pg.locator(".chart", has=pg.locator(f"[data-series-id='{sid}']"))


def roles(pg, sid: str, predicate: str = "true") -> list[tuple[str, str | None]]:
    fig = wait_chart(pg, sid, predicate)
    return [(t["meta"]["role"], t["meta"].get("env")) for t in fig["data"]]


def test_a_reward_chart_composes_stats_and_envs_with_toggles_and_filter(page, dashboard):
    run_id = post_run(dashboard, "comp", REWARDS)
    open_metrics(page, dashboard, "comp")
    page.locator(f"[data-series-id='{MEAN}']").scroll_into_view_if_needed()
    # Every environment overlaid; the pooled series carries the band and the envelope.
    got = roles(page, MEAN, "gd.data.some(t => t.meta.role === 'envelope')"
                " && gd.data.filter(t => t.meta.role === 'env').length === 2")
    assert got == [("envelope", None), ("band", None), ("raw", None), ("env", "countdown"),
                   ("env", "math"), ("last", None)]  # a dot ends the main line
    # No chart of a single statistic or environment is left.
    for stat, env in [("std", None), ("min", None), ("max", None), ("mean", "countdown")]:
        other = series_id("reward", "reward", stat, env)
        assert page.query_selector(f"[data-series-id='{other}']") is None
    fig = wait_chart(page, MEAN)
    raw = next(t for t in fig["data"] if t["meta"]["role"] == "raw")
    assert raw["y"] == [1.0, 0.875, 0.75]
    assert raw["color"] == dashboard.get(f"/api/runs/{run_id}")["color"]
    env = next(t for t in fig["data"] if t["meta"]["role"] == "envelope")
    assert max(env["y"]) == 2.0 and min(env["y"]) == 0.0  # the pooled min and max

    legend = card(page, MEAN).locator("[data-chart-legend]")
    legend.get_by_label("± std").uncheck()
    assert [r for r, _ in roles(page, MEAN, "!gd.data.some(t => t.meta.role === 'band')")] == [
        "envelope", "raw", "env", "env", "last"]
    legend.get_by_label("min/max").uncheck()
    assert [r for r, _ in roles(page, MEAN, "!gd.data.some(t => t.meta.role === 'envelope')")] == [
        "raw", "env", "env", "last"]
    legend.get_by_label("± std").check()
    legend.get_by_label("min/max").check()
    # One environment: its own line, band and envelope only.
    legend.get_by_label("Environments of reward").select_option("math")
    got = roles(page, MEAN, "gd.data.every(t => t.meta.env === 'math')")
    assert got == [("envelope", "math"), ("band", "math"), ("env", "math"), ("last", "math")]
    fig = wait_chart(page, MEAN)
    assert next(t for t in fig["data"] if t["meta"]["role"] == "env")["y"] == [0.75, 0.25, 0.75]
    legend.get_by_label("Environments of reward").select_option("@")
    assert roles(page, MEAN, "gd.data.every(t => t.meta.env === null)") == [
        ("envelope", None), ("band", None), ("raw", None), ("last", None)]


def test_groups_counts_share_one_stacked_chart(page, dashboard):
    post_run(dashboard, "grp", REWARDS)
    open_metrics(page, dashboard, "grp")
    page.locator(f"[data-series-id='{GROUPS}']").scroll_into_view_if_needed()
    fig = wait_chart(page, GROUPS, "gd.data.filter(t => t.meta.role === 'stack').length === 2")
    stacks = [t["meta"]["stat"] for t in fig["data"] if t["meta"]["role"] == "stack"]
    assert stacks == ["informative", "tied"]  # they add up to count; no group counted twice
    lines = {t["meta"].get("stat") for t in fig["data"] if t["meta"]["role"] != "stack"}
    assert {"count", "all_min", "all_max"} <= lines  # subsets of tied: lines over the stack
    assert page.eval_on_selector_all("[data-section='fixed:Groups'] .chart", "e => e.length") == 1
    assert page.evaluate(f"""document.querySelector("[data-series-id='{GROUPS}']").data
        .filter(t => t.meta.role === 'stack').every(t => t.stackgroup)""")


def test_data_quality_is_collapsed_and_flags_a_non_zero_counter(page, dashboard):
    post_run(dashboard, "dq", REWARDS)
    open_metrics(page, dashboard, "dq")
    section = page.locator("[data-section='fixed:Data quality']")
    section.wait_for()
    toggle = section.locator(".section-toggle")
    assert toggle.get_attribute("aria-expanded") == "false"
    # The flag is set from the counters once they are loaded (the section loads them itself,
    # collapsed): wait for the loads and the refresh after them, then it says nothing.
    page.wait_for_function("""() => { const t = window.telescope, v = t && t.view;
        if (!v || !v.quality.size || v.qualityTimer) return false;
        return [...v.quality].every(c => t.runs.every(s => {
          const entries = s.families.get(c.family) || [];
          return entries.length && entries.every(e => s.series.has(e.id)
            && !t.loader.isPending(s, e.id)); })); }""")
    assert section.locator("[data-quality-flag]").is_hidden()  # everything is zero so far
    # A reward outside countdown's declared 0–2: outside_count is no longer zero.
    dashboard.post([{"v": 1, "id": "dq-out", "type": "samples", "run": "dq", "step": 3,
                     "env": "countdown", "sample_id": ["o1", "o2"], "group_id": ["og", "og"],
                     "reward": [3.0, 1.0]}])
    flag = section.locator("[data-quality-flag]")
    flag.wait_for(state="visible", timeout=15_000)
    assert "not zero" in flag.text_content()
    assert "reward outside_count" in flag.get_attribute("title")
    assert toggle.get_attribute("aria-expanded") == "false"
    toggle.click()
    sid = series_id("ranges", "reward", "outside_count", None)
    bad = page.locator(".chart.quality-bad", has=page.locator(f"[data-series-id='{sid}']"))
    assert bad.count() == 1
    wait_chart(page, sid, "gd.data.some(t => t.y.some(v => v > 0))")
    # Quality counters are no charts of their own sections any more.
    for sec in ("fixed:Reward", "fixed:Ranges"):
        titles = page.eval_on_selector_all(f"[data-section='{sec}'] .chart-title",
                                           "e => e.map(x => x.textContent)")
        assert not any(q in t for t in titles for q in ("null_count", "outside_count", "excluded"))


def test_the_demo_run_fits_in_sixty_charts(page, dashboard):
    from ingest.write.demo import demo_messages

    messages = list(demo_messages("demo60", 200))
    for i in range(0, len(messages), 100):
        dashboard.post(messages[i:i + 100])
    run_id = dashboard.run_id("demo60")
    catalog = dashboard.get(f"/api/runs/{run_id}/catalog")["series"]
    raw = [e for e in catalog if not e.get("normalized")]
    open_metrics(page, dashboard, "demo60")
    page.wait_for_function(
        f"window.telescope && window.telescope.view.bySeries.size === {len(raw)}", timeout=20_000)
    charts = page.eval_on_selector_all(".chart", "e => e.length")
    assert charts <= 60, charts
    assert len(raw) > 4 * charts  # every stored series still drawn by some chart
    page.wait_for_timeout(1500)
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "metrics-composed.png"), full_page=True)


def test_live_points_extend_a_composed_chart_in_place(page, dashboard):
    post_run(dashboard, "lv", REWARDS)
    open_metrics(page, dashboard, "lv")
    page.locator(f"[data-series-id='{MEAN}']").scroll_into_view_if_needed()
    wait_chart(page, MEAN, "gd.data.some(t => t.meta.role === 'envelope')")
    page.evaluate(f"document.querySelector(\"[data-series-id='{MEAN}']\").__kept = true")
    dashboard.post([{"v": 1, "id": f"lv-live-{env}", "type": "samples", "run": "lv", "step": 3,
                     "env": env, "sample_id": [f"{env}-l1", f"{env}-l2"],
                     "group_id": [f"{env}-lg", f"{env}-lg"], "reward": rs}
                    for env, rs in (("countdown", [2.0, 0.0]), ("math", [1.0, 1.0]))])
    fig = wait_chart(page, MEAN, "gd.data.filter(t => ['raw', 'env'].includes(t.meta.role))"
                                 ".every(t => t.x.includes(3))"
                                 " && gd.data.find(t => t.meta.role === 'band').x.includes(3)")
    raw = next(t for t in fig["data"] if t["meta"]["role"] == "raw")
    assert raw["x"] == [0, 1, 2, 3] and raw["y"][-1] == 1.0
    env = next(t for t in fig["data"] if t["meta"]["role"] == "envelope")
    assert 3 in env["x"]
    # The same Plotly graph, updated: not a new chart.
    assert page.evaluate(f"document.querySelector(\"[data-series-id='{MEAN}']\").__kept === true")


def test_registered_keys_get_human_titles_and_a_help_mark(page, dashboard):
    dashboard.post([step("reg", n, {"entropy": 1.0, "train/clip_frac": 0.1, "my/own_key": 2.0,
                                    "timing_forward_microbatch_mean": 0.5}) for n in range(3)])
    open_metrics(page, dashboard, "reg")
    wait_chart(page, series_id("step", "entropy"))

    def head(key: str) -> tuple[str, str | None]:
        c = card(page, series_id("step", key))
        help_mark = c.locator("[data-help]")
        return (c.locator(".chart-title").text_content(),
                help_mark.get_attribute("title") if help_mark.count() else None)

    title, tip = head("entropy")
    assert title == "Entropy" and tip.startswith("Policy entropy") and "key: entropy" in tip
    title, tip = head("train/clip_frac")
    assert title == "Clip fraction" and "n_mini == 1" in tip
    assert head("timing_forward_microbatch_mean")[0] == "Forward pass (per microbatch)"
    assert head("my/own_key") == ("own_key", None)  # unknown: its key, no "?"
    # Search finds a chart by its key or by its human title.
    page.fill("input[name=search]", "clip_frac")
    page.wait_for_function("document.querySelectorAll('.chart:not([hidden])').length === 1")
    page.fill("input[name=search]", "forward pass")
    page.wait_for_function(
        SHOWN_ARE,
        arg=[series_id("step", "timing_forward_microbatch_mean")])


def test_search_finds_a_composed_chart_by_any_series_it_draws(page, dashboard):
    post_run(dashboard, "srch", REWARDS)
    open_metrics(page, dashboard, "srch")
    wait_chart(page, series_id("step", "loss"))
    page.fill("input[name=search]", "reward std")  # a statistic drawn as the band
    page.wait_for_function(
        SHOWN_ARE, arg=[MEAN])
    page.fill("input[name=search]", "math")  # an environment overlaid in the charts
    page.wait_for_function("document.querySelectorAll('.chart:not([hidden])').length > 1")
    assert card(page, MEAN).is_visible()
    assert not card(page, series_id("step", "loss")).is_visible()
