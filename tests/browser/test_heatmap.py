"""The distribution heatmap in Chromium: one click from the reward chart opens
a heatmap of the server's counts (steps × value bins) in a dialog of its own, its environment
picker re-reads it, its close button or Escape closes it, it follows the theme, and charts
without a distribution (a trainer key) have no such button."""

from __future__ import annotations

import math
from typing import Any
from urllib.parse import urlencode

import pytest

from ingest.core.series_ids import series_id
from ingest.write.demo import demo_messages
from tests.browser.conftest import ARTIFACTS, wait_chart
from tests.browser.test_metrics_page import open_metrics

pytestmark = pytest.mark.browser

MEAN = series_id("reward", "reward", "mean", None)
LOSS = series_id("step", "loss/policy")
COMPLETION = series_id("rollouts", "completion_tokens", "mean", None)
PROMPT = series_id("rollouts", "prompt_tokens", "mean", None)
STEPS = 6

# The heatmap of a card: its Plotly trace, as drawn (null while there is none).
HEATMAP = """card => { const gd = card.querySelector('[data-heatmap-plot]');
  if (!gd || !gd.data || !gd.data.length) return null;
  const t = gd.data[0];
  return {z: t.z.map(r => Array.from(r)), x: Array.from(t.x), y: Array.from(t.y),
          meta: t.meta, colorscale: t.colorscale, text: t.text[0][0]}; }"""


def kept_finite(msgs: list[dict[str, Any]], env: str | None = None) -> int:
    return sum(1 for m in msgs if m["type"] == "samples" and (env is None or m["env"] == env)
               for r, d in zip(m["reward"], m["discard_reason"], strict=True)
               if d is None and r is not None and math.isfinite(r))


def card(pg, sid: str):
    return pg.locator(".chart", has=pg.locator(f"[data-series-id='{sid}']"))


def heatmap(pg, sid: str, predicate: str = "true") -> dict[str, Any]:
    """The drawn heatmap opened from the card of `sid` (a dialog of the page), once
    `predicate` (JS over `h`) holds."""
    handle = pg.locator("body").element_handle()
    pg.wait_for_function(
        f"card => {{ const h = ({HEATMAP})(card); return !!(h && ({predicate})); }}",
        arg=handle, timeout=20_000)
    return pg.evaluate(HEATMAP, handle)


def total(h: dict[str, Any]) -> int:
    return sum(v for row in h["z"] for v in row if v is not None)


def test_the_reward_chart_opens_its_distribution(page, dashboard):
    msgs = list(demo_messages("demo", STEPS, seed=3))
    dashboard.post(msgs)
    run_id = open_metrics(page, dashboard, "demo")
    page.locator(f"[data-series-id='{MEAN}']").scroll_into_view_if_needed()
    wait_chart(page, MEAN)
    reward = card(page, MEAN)
    button = reward.get_by_role("button", name="Distribution of reward", exact=True)
    assert button.get_attribute("aria-expanded") == "false"
    button.click()

    # Every kept sample with a finite reward, in the server's cells (bins on y, steps on x).
    h = heatmap(page, MEAN)
    server = dashboard.get(f"/api/runs/{run_id}/distribution?kind=reward&key=reward")
    assert total(h) == server["total"] == kept_finite(msgs) > 0
    assert h["y"] == server["bins"]
    n_bins = len(server["bins"]) - 1
    assert h["z"] == [[c[b] or None for c in server["counts"]] for b in range(n_bins)]
    assert h["x"] == [s - 0.5 for s in range(STEPS + 1)]
    assert h["meta"]["role"] == "distribution" and h["meta"]["run"] == run_id
    assert h["text"].startswith("step 0<br>reward ")
    assert button.get_attribute("aria-expanded") == "true"
    panel = page.locator("[data-heatmap]")
    assert panel.evaluate("el => el.tagName === 'DIALOG' && el.open")
    assert "Distribution of reward" in panel.locator(".heatmap-title").text_content()

    # One environment: its own counts, read again from the server.
    picker = panel.get_by_label("Environment of the distribution of reward")
    assert picker.evaluate("el => [...el.options].map(o => o.value)") == [
        "", "countdown", "hendrycks_math"]
    picker.select_option("countdown")
    h = heatmap(page, MEAN, "h.meta.env === 'countdown'")
    assert total(h) == kept_finite(msgs, "countdown") < kept_finite(msgs)
    picker.select_option("")
    assert total(heatmap(page, MEAN, "h.meta.env === null")) == kept_finite(msgs)

    # It follows the theme; its close button closes it, and so does Escape.
    ARTIFACTS.mkdir(exist_ok=True)
    panel.screenshot(path=str(ARTIFACTS / "distribution-heatmap-light.png"))
    low = h["colorscale"][0][1]
    page.emulate_media(color_scheme="dark")
    h = heatmap(page, MEAN, f"h.colorscale[0][1] !== '{low}'")
    assert total(h) == kept_finite(msgs)
    panel.screenshot(path=str(ARTIFACTS / "distribution-heatmap-dark.png"))
    panel.get_by_role("button", name="Close the distribution of reward").click()
    assert page.locator("[data-heatmap]").count() == 0
    assert button.get_attribute("aria-expanded") == "false"
    assert button.evaluate("b => document.activeElement === b")  # back to its button
    button.click()
    heatmap(page, MEAN)
    page.keyboard.press("Escape")
    page.wait_for_function("() => !document.querySelector('[data-heatmap]')")
    assert button.get_attribute("aria-expanded") == "false"


def test_only_value_charts_of_samples_have_a_distribution(page, dashboard):
    dashboard.post(list(demo_messages("plain", 3, seed=4)))
    run_id = open_metrics(page, dashboard, "plain")
    wait_chart(page, LOSS)
    assert card(page, LOSS).locator("[data-distribution]").count() == 0
    assert card(page, PROMPT).locator("[data-distribution]").count() == 0
    lengths = card(page, COMPLETION)
    lengths.scroll_into_view_if_needed()
    lengths.get_by_role("button", name="Distribution of completion_tokens", exact=True).click()
    h = heatmap(page, COMPLETION)
    query = urlencode({"kind": "rollouts", "key": "completion_tokens"})
    server = dashboard.get(f"/api/runs/{run_id}/distribution?{query}")
    assert server["integer"] and total(h) == server["total"] > 0
