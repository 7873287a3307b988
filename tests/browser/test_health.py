"""Health hints in Chromium: a registered key whose hint fires gets a ⚠ in its
chart header and its section's header; a healthy run gets none; registered keys carry the
registry's titles and "?" tooltips."""

from __future__ import annotations

import pytest

from ingest.core.series_ids import series_id
from tests.browser.conftest import step, wait_chart
from tests.browser.test_metrics_page import open_metrics

pytestmark = pytest.mark.browser

CLIP = series_id("step", "train/clip_frac")
LOSS = series_id("step", "train/loss_avg")
TRAIN = "[data-section='user:train']"


def card(pg, sid: str):
    return pg.locator(".chart", has=pg.locator(f"[data-series-id='{sid}']"))


def post_grpo(dashboard, run: str, clip: list[float], config: dict) -> None:
    dashboard.post([{"v": 1, "id": f"{run}-start", "type": "run.start", "run": run,
                     "config": config}]
                   + [step(run, n, {"train/clip_frac": c, "train/loss_avg": 0.5 - 0.01 * n})
                      for n, c in enumerate(clip)])


def test_a_clip_fraction_at_n_mini_1_warns_on_its_chart_and_section(page, dashboard):
    post_grpo(dashboard, "nmini", [0.0, 0.0, 0.02, 0.0], {"n_mini": 1})
    run_id = dashboard.run_id("nmini")
    # The page reads the run's config (docs/protocol.md "One run": GET /api/runs/<id> carries it).
    assert dashboard.get(f"/api/runs/{run_id}").get("config") == {"n_mini": 1}
    open_metrics(page, dashboard, "nmini")
    mark = card(page, CLIP).locator("[data-health]")
    mark.wait_for(state="visible")
    assert mark.text_content() == "\u26a0"
    assert "n_mini == 1" in mark.get_attribute("title")
    assert "step 2" in mark.get_attribute("title")
    assert mark.get_attribute("aria-label").startswith("Health warning: Not 0 at step 2")
    flag = page.locator(f"{TRAIN} [data-health-flag]")
    flag.wait_for(state="visible")
    assert flag.text_content() == "\u26a0 1"
    assert flag.get_attribute("title").startswith("Clip fraction: Not 0 at step 2")
    # The section's other chart is healthy.
    wait_chart(page, LOSS)
    assert card(page, LOSS).locator("[data-health]").count() == 0


def test_a_healthy_run_shows_no_mark(page, dashboard):
    post_grpo(dashboard, "fine", [0.0, 0.0, 0.0, 0.0], {"n_mini": 1})
    # Clipping is normal with several minibatches: no hint for a nonzero clip fraction there.
    post_grpo(dashboard, "fine8", [0.01, 0.02, 0.015, 0.01], {"n_mini": 8})
    for run in ("fine", "fine8"):
        open_metrics(page, dashboard, run)
        wait_chart(page, CLIP)
        # Evaluated (with the run's config read), and nothing fired.
        card(page, CLIP).and_(page.locator("[data-health-state='ok']")).wait_for()
        assert page.locator("[data-health]:visible").count() == 0
        assert page.locator("[data-health-flag]:visible").count() == 0


def test_a_cross_key_hint_loads_the_key_it_compares_with(page, dashboard):
    informative = [6, 3, 0, 0, 0, 0, 0]
    dashboard.post([step("tied", n, {"train/grpo_informative_group_count": v,
                                     "train/grpo_group_count": 8})
                    for n, v in enumerate(informative)])
    open_metrics(page, dashboard, "tied")
    sid = series_id("step", "train/grpo_informative_group_count")
    mark = card(page, sid).locator("[data-health]")
    mark.wait_for(state="visible")
    assert "the reward does not discriminate" in mark.get_attribute("title")
    assert page.locator(f"{TRAIN} [data-health-flag]").text_content() == "\u26a0 1"
    # One informative group in eight is not near zero: the mark goes away with the new step.
    dashboard.post([step("tied", 7, {"train/grpo_informative_group_count": 4,
                                     "train/grpo_group_count": 8})])
    wait_chart(page, sid, "gd.data[0].x.includes(7)")
    mark.wait_for(state="hidden")
    page.locator(f"{TRAIN} [data-health-flag]").wait_for(state="hidden")


def test_registered_keys_carry_registry_titles_and_help(page, dashboard):
    keys = {"train/grpo_informative_group_count": "Informative groups",
            "val/dpo_accuracy": "DPO accuracy (validation)",
            "timing_backward_total": "Backward pass",
            "optim/nonfinite_skips_total": "Non-finite skips",
            "train/initial_ratio_max": "Initial importance ratio (max)"}
    dashboard.post([step("titles", n, {**{k: 1.0 for k in keys}, "my/own": 1.0})
                    for n in range(3)])
    open_metrics(page, dashboard, "titles")
    wait_chart(page, series_id("step", "train/grpo_informative_group_count"))
    for key, title in keys.items():
        c = card(page, series_id("step", key))
        assert c.locator(".chart-title").text_content() == title
        tip = c.locator("[data-help]").get_attribute("title")
        assert "aggregation: " in tip and tip.endswith(f"key: {key}"), tip
    own = card(page, series_id("step", "my/own"))
    assert own.locator(".chart-title").text_content() == "own"
    assert own.locator("[data-help]").count() == 0
