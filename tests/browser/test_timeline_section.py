"""The Metrics page's Timeline section in Chromium, fed events through the real HTTP ingest: the
`timing_*` series the server derives from them (catalog kind `timeline`) are charted in their
groups with the registry's titles and a "derived" badge (the parts of one question in one chart:
charts/compose.js timelinePart), a run with nothing but events gets the section, a straggler
rank fires its health hint naming the rank, and a trainer's own key of a derived series' name,
arriving live, is drawn just before the derived chart drawing it and badged "logged"."""

from __future__ import annotations

import time
from typing import Any

import pytest

from ingest.core.series_ids import series_id
from tests.browser.conftest import step, wait_chart
from tests.browser.test_health import card
from tests.browser.test_metrics_page import open_metrics, section_titles
from tests.server.test_events_api import events_msg

pytestmark = pytest.mark.browser

T = time.time() - 300  # the run's first event: five minutes ago
STEPS = range(4)
# Per step, each rank's forward time, then a 0.5-s weight broadcast: rank 2 works 3 s where
# the others work 1 s, so the rank spread (slowest / median) is 3 and rank 2 the slowest.
WORK = {0: 0.5, 1: 0.5, 2: 2.5}


def events() -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = [{"name": "training_loop_start", "start": T}]
    for s in STEPS:
        t = T + 5 * s + 1  # steps of 5 s, 1.5 s of them waiting for data
        rows += [{"name": "forward", "start": t, "end": t + d, "step": s, "rank": r}
                 for r, d in WORK.items()]
        rows += [{"name": "weight_broadcast", "start": t + 3, "end": t + 3.5, "step": s,
                  "rank": r} for r in WORK]
        rows.append({"name": "save_batch", "start": t + 4, "step": s,
                     "source": "orchestrator"})
        rows.append({"name": "generation", "start": t - 4, "end": t + 2, "source": "inference",
                     "server": 0, "slot": 0, "step": s, "status": "normal", "tokens": 64})
    return rows


def derived(key: str) -> str:
    return series_id("timeline", key)


def test_derived_series_fill_the_timeline_section_with_badges_and_a_straggler_hint(
        page, dashboard):
    run = "spans-only"
    dashboard.post(events_msg("ev-1", events(), run=run))
    run_id = dashboard.run_id(run)
    catalog = dashboard.get(f"/api/runs/{run_id}/catalog")["series"]
    kinds = {e["kind"] for e in catalog}
    assert kinds == {"timeline"}, "a run with nothing but events"
    spread = dashboard.get(f"/api/runs/{run_id}/series?ids={derived('timing_rank_spread')}")
    assert spread["series"][derived("timing_rank_spread")]["value"] == [3.0] * len(STEPS)

    open_metrics(page, dashboard, run)
    wait_chart(page, derived("timing_step_total"))  # with timing_step_active and waiting
    assert section_titles(page) == ["Timeline"]
    groups = page.eval_on_selector_all(
        "[data-section='fixed:Timeline'] .group-title", "els => els.map(e => e.textContent)")
    assert groups == ["Full step", "Per microbatch", "Ranks", "Weight sync", "Inference"]

    # Titled by the registry, as a trainer's key of the same name would be, and badged.
    active = card(page, derived("timing_step_total"))
    assert active.locator(".chart-title").text_content() == "Training step"
    badge = active.locator("[data-origin]")
    assert badge.text_content() == "derived"
    assert badge.get_attribute("data-origin") == "timeline"
    assert "events" in badge.get_attribute("title")
    shown = "els => els.filter(e => !e.hidden && e.textContent === 'derived').length"
    page.wait_for_function(f"window.telescope.view.bySeries.size === {len(catalog)}")
    charts = page.eval_on_selector_all("[data-section='fixed:Timeline'] .chart", "e => e.length")
    assert page.eval_on_selector_all("[data-origin='timeline']", shown) == charts  # every one
    assert charts < len(catalog)  # several series a chart
    idle = card(page, derived("timing_idle_pct"))
    assert idle.locator(".chart-title").text_content() == "Inference idle"

    # Rank 2 straggles at every step: the rank spread's chart and the section say so.
    spread_card = card(page, derived("timing_rank_spread"))
    spread_card.scroll_into_view_if_needed()
    mark = spread_card.locator("[data-health]")
    mark.wait_for(state="visible")
    assert mark.get_attribute("title").startswith(
        "Rank 2 is a straggler: it worked 3\u00d7 the median rank\u2019s time at step 3")
    flag = page.locator("[data-section='fixed:Timeline'] [data-health-flag]")
    flag.wait_for(state="visible")
    assert "Rank spread (slowest / median): Rank 2 is a straggler" in flag.get_attribute("title")
    # Weight sync is 0.5 s of 5-s steps, the trainer waits 1.5 s of them (the step chart's
    # hint) and inference idles 40% of each window: those hints stay quiet.
    for key in ("timing_weight_sync_trainer_total", "timing_step_total", "timing_idle_pct"):
        quiet = card(page, derived(key)).and_(page.locator("[data-health-state='ok']"))
        quiet.wait_for(state="attached")
    assert flag.text_content() == "\u26a0 1"

    # The trainer logs its own timing_step_active, live: a chart of its own just before the
    # derived chart drawing it, titled as the registry says, told apart by the badges.
    page.evaluate("window.__same_page = true; scrollTo(0, 0)")
    dashboard.post([step(run, s, {"timing_step_active": 2.5}) for s in STEPS])
    logged = series_id("step", "timing_step_active")
    wait_chart(page, logged)
    mine = card(page, logged)
    mine.locator("[data-origin='step']").wait_for(state="visible")
    assert mine.locator("[data-origin]").text_content() == "logged"
    assert mine.locator(".chart-title").text_content() == "Active step"
    assert active.locator("[data-origin]").text_content() == "derived"
    order = page.eval_on_selector_all(
        "[data-section='fixed:Timeline'] .group:first-of-type .chart .plot",
        "els => els.map(e => e.dataset.seriesId)")
    assert order.index(logged) + 1 == order.index(derived("timing_step_total")), order
    assert page.evaluate("window.__same_page") is True
