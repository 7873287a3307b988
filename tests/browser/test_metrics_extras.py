"""Issue 31's Metrics page items in Chromium: the Distribution view opens as a wide dialog of its
own (the card's row keeps its size), its title whole, and fills the screen in fullscreen; a
metric search that matches nothing says so and clears in one click; Plotly's zoom hint does not
cover the view tabs; the GRPO health template's series chips are one per name, their tooltips
in words."""

from __future__ import annotations

from typing import Any

import pytest

from ingest.core.series_ids import series_id
from ingest.write.demo import demo_messages
from tests.browser.conftest import ARTIFACTS, Dashboard, step, wait_chart
from tests.browser.test_custom_templates import feed, new_dashboard
from tests.browser.test_custom_view import node, open_custom
from tests.browser.test_heatmap import card, heatmap
from tests.browser.test_metrics_page import open_metrics

pytestmark = pytest.mark.browser

MEAN = series_id("reward", "reward", "mean", None)
LOSS = series_id("step", "loss")


def test_the_distribution_view_is_wide_whole_titled_and_fills_fullscreen(
        page: Any, dashboard: Dashboard) -> None:
    dashboard.post(list(demo_messages("a-run-with-a-rather-long-name-for-its-title", 6, seed=3)))
    open_metrics(page, dashboard, "a-run-with-a-rather-long-name-for-its-title")
    reward = card(page, MEAN)
    reward.scroll_into_view_if_needed()
    wait_chart(page, MEAN)
    before = reward.bounding_box()
    row = reward.evaluate("el => el.parentElement.getBoundingClientRect().width")
    reward.get_by_role("button", name="Distribution of reward", exact=True).click()
    heatmap(page, MEAN)
    view = page.locator("[data-heatmap]")
    box = view.bounding_box()
    viewport = page.viewport_size
    # Its own wide card: most of the window, wider than the chart's row; the card unchanged.
    assert box["width"] >= 0.85 * viewport["width"] and box["width"] >= row
    assert box["height"] >= 0.6 * viewport["height"]
    assert reward.bounding_box() == before
    assert reward.locator("[data-heatmap]").count() == 0
    plot = view.locator("[data-heatmap-plot]").bounding_box()
    assert plot["width"] >= 0.8 * viewport["width"] and plot["height"] >= 0.45 * viewport["height"]
    title = view.locator(".heatmap-title")
    assert title.evaluate("t => t.scrollWidth <= t.clientWidth + 1 && t.scrollHeight"
                          " <= t.clientHeight + 1")  # nothing cut
    assert "Distribution of reward · a-run-with-a-rather-long-name-for-its-title" in \
        title.text_content()
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "distribution-view.png"))

    view.get_by_role("button", name="Fullscreen").click()
    page.wait_for_function("!!document.fullscreenElement?.closest('[data-heatmap]')")
    page.wait_for_function("""() => { const p = document.querySelector('[data-heatmap-plot]');
        const r = p.getBoundingClientRect(); return r.height >= 0.75 * innerHeight
        && r.width >= 0.9 * innerWidth; }""")
    full = view.locator(".heatmap-view").bounding_box()
    assert full["width"] == viewport["width"] and full["height"] == viewport["height"]
    svg = view.locator("[data-heatmap-plot] .main-svg").first.bounding_box()
    assert svg["height"] >= 0.75 * viewport["height"]  # Plotly drew at the screen's size
    page.screenshot(path=str(ARTIFACTS / "distribution-view-fullscreen.png"))
    view.get_by_role("button", name="Exit fullscreen").click()
    page.wait_for_function("!document.fullscreenElement")
    page.keyboard.press("Escape")
    page.wait_for_function("() => !document.querySelector('[data-heatmap]')")


def test_a_search_that_matches_nothing_says_so_and_clears(page: Any, dashboard: Dashboard
                                                         ) -> None:
    dashboard.post([step("s", n, {"loss": 1.0 / (n + 1), "entropy": 0.5}) for n in range(3)])
    open_metrics(page, dashboard, "s")
    wait_chart(page, LOSS)
    page.fill("input[name=search]", "zzz-nothing")
    message = page.locator("[data-no-match]")
    message.wait_for()
    assert message.locator("h2").text_content() == "No chart matches \u2018zzz-nothing\u2019"
    assert page.locator(".chart:not([hidden])").count() == 0
    message.get_by_role("button", name="Clear the search").click()
    page.wait_for_function("document.querySelectorAll('.chart:not([hidden])').length >= 2")
    assert message.is_hidden()
    assert page.input_value("input[name=search]") == ""
    page.fill("input[name=search]", "loss")
    page.wait_for_function("document.querySelectorAll('.chart:not([hidden])').length === 1")
    assert message.is_hidden()


def test_the_zoom_hint_does_not_cover_the_view_tabs(page: Any, dashboard: Dashboard) -> None:
    dashboard.post([step("z", n, {"loss": 1.0 / (n + 1)}) for n in range(20)])
    open_metrics(page, dashboard, "z")
    wait_chart(page, LOSS)
    plot = page.locator(f"[data-series-id='{LOSS}'] .nsewdrag").first.bounding_box()
    x0, y = plot["x"] + plot["width"] * 0.3, plot["y"] + plot["height"] * 0.5
    page.mouse.move(x0, y)
    page.mouse.down()
    page.mouse.move(x0 + plot["width"] * 0.3, y, steps=8)
    page.mouse.up()
    hint = page.locator(".plotly-notifier .notifier-note")
    hint.first.wait_for()
    assert "Double-click" in hint.first.text_content()
    h = page.locator(".plotly-notifier").bounding_box()
    for tab in page.locator(".view-tabs a").all():
        t = tab.bounding_box()
        overlap = not (h["x"] + h["width"] <= t["x"] or t["x"] + t["width"] <= h["x"]
                       or h["y"] + h["height"] <= t["y"] or t["y"] + t["height"] <= h["y"])
        assert not overlap, (tab.text_content(), h, t)
    controls = page.locator("#controls").bounding_box()
    assert h["y"] >= controls["y"] + controls["height"] or \
        h["y"] + h["height"] <= controls["y"]  # nor the controls


def test_the_grpo_health_templates_chips_are_one_per_name_in_words(
        page: Any, dashboard: Dashboard) -> None:
    feed(dashboard, "g")  # logs entropy and grad_norm, not train/entropy nor train/grad_norm
    open_custom(page, dashboard, "g")
    new_dashboard(page, "Health", "GRPO health")
    page.wait_for_function(f"""document.querySelector("{node('p4')} .plot")?.data
        ?.filter(t => t.meta?.role === 'raw').length === 2""")
    chips = page.evaluate("""() => [...document.querySelectorAll('.board [data-node-id]')]
        .filter(n => n.querySelector('.plot-series')).map(n => ({
          id: n.dataset.nodeId,
          names: [...n.querySelectorAll('.plot-series:not([hidden]) li .series-name')]
            .map(e => e.textContent),
          tips: [...n.querySelectorAll('.plot-series li .series-name')].map(e => e.title),
          all: [...n.querySelectorAll('.plot-series li .series-name')].map(e => e.textContent),
        }))""")
    by_id = {c["id"]: c for c in chips}
    for c in chips:
        assert len(c["all"]) == len(set(c["all"])), c  # no name twice
        for tip in c["tips"]:
            assert "|" not in tip and "%2F" not in tip, c  # no internal id
    # Entropy and Gradient norm: one logged key each, drawn; the alias the run lacks is no chip.
    assert by_id["p5"]["all"] == ["Entropy"] and by_id["p6"]["all"] == ["Gradient norm"]
    missing = page.locator(f"{node('p4')} .plot-series li.missing .series-name")
    assert missing.count() == 1
    assert missing.get_attribute("title").endswith(": not logged by the runs shown")
    assert "train/kl_max" in missing.get_attribute("title")
