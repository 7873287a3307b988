"""Composed charts in Chromium: one chart per metric with its mean line, ± std band
and min/max envelope toggled from the chart's legend, environments overlaid and filtered on the
chart, groups counts stacked, data-quality counters in a collapsed section that flags them, the
derived timing series composed by meaning (the parts of a step, of the lanes' time) with their
hints, and the demo run's All view within 60 charts besides its Timeline's 14."""

from __future__ import annotations

import time
from typing import Any

import pytest

from ingest.core.series_ids import series_id
from tests.browser.conftest import ARTIFACTS, step, wait_chart
from tests.browser.test_metrics_page import open_metrics
from tests.browser.test_normalize import REWARDS, post_run
from tests.server.test_events_api import events_msg

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
    assert "Reward · outside the declared range" in flag.get_attribute("title")
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


def busy_events(t0: float) -> list[dict[str, Any]]:
    """Steps of 10 s where the one rank works 1.5 s (1 s forward, 0.5 s weight broadcast) and
    waits 8.5 s for data; the inference server's weight sync takes 3 s of each step; the one
    lane generates 7 s of each 10-s window (a discarded generation now and then) and computes
    rewards 1 s of it: waiting for data (85% of the step) and inference weight sync (30%) warn,
    trainer weight sync (5%) and inference idle (20%) do not."""
    rows: list[dict[str, Any]] = [{"name": "training_loop_start", "start": t0}]
    for s in range(5):
        t = t0 + 10 * s + 8.5
        rows += [{"name": "forward", "start": t, "end": t + 1, "step": s, "rank": 0},
                 {"name": "weight_broadcast", "start": t + 1, "end": t + 1.5, "step": s,
                  "rank": 0},
                 {"name": "weight_sync", "start": t + 1, "end": t + 4, "step": s,
                  "source": "inference", "server": 0},
                 {"name": "save_batch", "start": t0 + 10 * (s + 1), "step": s,
                  "source": "orchestrator"},
                 {"name": "generation", "start": t0 + 10 * s + 1, "end": t0 + 10 * s + 8,
                  "source": "inference", "server": 0, "slot": 0, "step": s, "tokens": 64,
                  "status": "discarded" if s % 2 else "normal"},
                 {"name": "compute_reward", "start": t0 + 10 * s + 8, "end": t0 + 10 * s + 9,
                  "source": "reward", "server": 0, "slot": 0, "step": s, "status": "normal"}]
    return rows


DASHES = """sid => document.querySelector(`[data-series-id="${CSS.escape(sid)}"]`).data
    .filter(t => t.meta.role !== 'last').map(t => [t.meta.key, t.line.dash])"""


def test_derived_timings_compose_by_meaning_with_each_series_hints(page, dashboard):
    # Whole seconds, and spans of halves: every difference is exact.
    dashboard.post(events_msg("busy-1", busy_events(float(int(time.time()) - 600)), run="busy"))
    run_id = dashboard.run_id("busy")
    catalog = dashboard.get(f"/api/runs/{run_id}/catalog")["series"]
    open_metrics(page, dashboard, "busy")
    page.wait_for_function(
        f"window.telescope && window.telescope.view.bySeries.size === {len(catalog)}")
    step_chart = series_id("timeline", "timing_step_total")
    assert page.evaluate(DRAWN, [series_id("timeline", k) for k in (
        "timing_step_active", "timing_waiting_for_data", "timing_forward_microbatch_mean")])
    # The step's three series in one chart: the whole step solid, the parts dashed, named.
    fig = wait_chart(page, step_chart, "gd.data.filter(t => t.meta.role === 'part').length === 2")
    lines = [(t["meta"]["role"], t["meta"]["key"], t["name"]) for t in fig["data"]
             if t["meta"]["role"] != "last"]
    assert lines == [("raw", "timing_step_total", "busy · whole step"),
                     ("part", "timing_step_active", "busy · active"),
                     ("part", "timing_waiting_for_data", "busy · waiting for data")]
    raw = dict((t["meta"]["key"], t["y"]) for t in fig["data"] if t["meta"]["role"] != "last")
    assert raw["timing_waiting_for_data"] == [8.5] * 4  # the first step is left out by default
    assert raw["timing_step_total"] == [10.0] * 4
    dashes = page.evaluate(DASHES, step_chart)
    assert dashes[0] == ["timing_step_total", "solid"] and len({d for _, d in dashes}) == 3
    step_card = card(page, step_chart)
    assert step_card.locator(".chart-title").text_content() == "Training step"
    assert step_card.locator("[data-origin]").text_content() == "derived"
    legend = step_card.locator("[data-chart-legend] [data-part]")
    assert legend.all_text_contents() == [" whole step", " active", " waiting for data"]
    assert "waiting for data: Time the trainer waited" in step_card.locator(
        "[data-help]").get_attribute("title")
    # Its waiting-for-data hint evaluates in the composed chart (a part, not its primary).
    mark = step_card.locator("[data-health]")
    mark.wait_for(state="visible")
    assert mark.get_attribute("title").startswith("Waiting for data 85% of step 4 (8.5 s of 10 s)")
    # Two weight syncs, one chart: the inference one warns and says whose hint it is.
    sync = card(page, series_id("timeline", "timing_weight_sync_trainer_total"))
    sync.scroll_into_view_if_needed()
    sync_mark = sync.locator("[data-health]")
    sync_mark.wait_for(state="visible")
    assert sync_mark.get_attribute("title") == (
        "Weight sync (inference): Weight sync took 30% of step 4 (3 s of 10 s), over 25% at each"
        " of the last 3 steps with one: the trainer and inference stall on it; sync less often"
        " or faster")
    # An op's total and its per-microbatch mean: one chart in the Full step group.
    forward = series_id("timeline", "timing_forward_total")
    fig = wait_chart(page, forward, "gd.data.some(t => t.meta.role === 'part')")
    assert {t["meta"]["key"] for t in fig["data"]} == {
        "timing_forward_total", "timing_forward_microbatch_mean"}
    assert card(page, forward).locator(".chart-title").text_content() == "Forward pass"
    groups = page.eval_on_selector_all(
        "[data-section='fixed:Timeline'] .group", """gs => gs.map(g => [
        g.querySelector('.group-title').textContent,
        [...g.querySelectorAll('.plot')].map(p => p.dataset.seriesId)])""")
    grouped = dict(groups)
    assert forward in grouped["Full step"] and step_chart in grouped["Full step"]
    assert grouped["Per microbatch"] == [series_id("timeline", "timing_microbatch_count")]
    page.wait_for_function("""() => document.querySelector(
        "[data-section='fixed:Timeline'] [data-health-flag]")?.textContent === '\\u26a0 2'""")
    idle = card(page, series_id("timeline", "timing_idle_pct"))
    idle.and_(page.locator("[data-health-state='ok']")).wait_for(state="attached")
    # The search finds a composed chart by the human title of any series it draws.
    page.fill("input[name=search]", "waiting for data")
    page.wait_for_function(SHOWN_ARE, arg=[step_chart])


# Charts per section of the All view, and the Timeline's derived (badged) ones.
SECTION_CHARTS = """() => [...document.querySelectorAll('[data-section]')].map(s => [
    s.dataset.section, s.querySelectorAll('.chart').length,
    s.querySelectorAll(".chart [data-origin='timeline']").length])"""
# Every catalog series' chart is a card on the page.
DRAWN = """ids => ids.every(id => { const c = window.telescope.view.chartFor(id);
    return !!(c && c.el.isConnected); })"""


def test_the_demo_run_fits_in_sixty_charts_and_its_timeline_in_fourteen(page, dashboard):
    from ingest.write.demo import demo_messages

    messages = list(demo_messages("demo60", 200))
    for i in range(0, len(messages), 100):
        dashboard.post(messages[i:i + 100])
    run_id = dashboard.run_id("demo60")
    catalog = dashboard.get(f"/api/runs/{run_id}/catalog")["series"]
    raw = [e for e in catalog if not e.get("normalized")]
    derived = [e for e in raw if e["kind"] == "timeline"]
    logged = [e for e in raw if e["kind"] == "step" and e["section"] == "Timeline"]
    assert len(derived) == 28 and len(logged) == 6  # the simulated job's events, rank 0's keys
    open_metrics(page, dashboard, "demo60")
    page.wait_for_function(
        f"window.telescope && window.telescope.view.bySeries.size === {len(raw)}", timeout=20_000)
    assert page.evaluate(DRAWN, [e["id"] for e in raw])  # every stored series still drawn
    sections = {key: (n, badged) for key, n, badged in page.evaluate(SECTION_CHARTS)}
    timeline, derived_charts = sections.pop("fixed:Timeline")
    # The sixty-chart bound is about the sample families' readability: the other sections.
    others = sum(n for n, _ in sections.values())
    assert others <= 60, sections
    assert len(raw) - len(derived) - len(logged) > 4 * others
    # The derived series: five families (step, weight sync, mean times, generation and reward
    # shares), inference idle, rank spread, slowest rank and microbatch count alone (9), and
    # one chart per trainer op with its per-microbatch mean; the demo's ops are train_step, its
    # forward and backward, optimizer_step and weight_broadcast: 9 + 5 = 14.
    assert derived_charts <= 14, derived_charts
    assert len(derived) >= 2 * derived_charts
    assert timeline == derived_charts + len(logged)  # a trainer's timing key keeps its own chart
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
