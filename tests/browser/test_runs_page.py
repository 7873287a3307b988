"""The runs page in Chromium against a live server."""

from __future__ import annotations

import pytest

from ingest.series_ids import series_id
from tests.browser.conftest import step, wait_chart

pytestmark = pytest.mark.browser


def test_it_lists_projects_and_runs_and_opens_ticked_runs_overlaid(page, dashboard):
    dashboard.post([step("alpha", n, {"entropy": 1.0}) for n in range(3)]
                   + [step("beta", n, {"entropy": 2.0}) for n in range(7)]
                   + [{"v": 1, "id": "end", "type": "run.end", "run": "beta",
                       "status": "finished"}])
    alpha, beta = dashboard.run_id("alpha"), dashboard.run_id("beta")
    page.goto(dashboard.url + "/")
    page.wait_for_selector(f"tr[data-run-id='{beta}']")
    assert page.text_content("section.project h2") == "browser"
    row = page.locator(f"tr[data-run-id='{alpha}']")
    assert row.locator(".badge").text_content() == "live"
    assert row.locator("td").nth(4).text_content() == "2"
    row_b = page.locator(f"tr[data-run-id='{beta}']")
    assert row_b.locator(".badge").text_content() == "finished"
    assert row_b.locator("td").nth(4).text_content() == "6"

    # A run that starts while the page is open appears without a reload.
    dashboard.post(step("gamma", 0, {"entropy": 3.0}))
    page.wait_for_selector(f"tr[data-run-id='{dashboard.run_id('gamma')}']", timeout=10_000)

    page.get_by_label("Overlay run alpha").check()
    page.get_by_label("Overlay run beta").check()
    page.get_by_role("button", name="Open 2 runs overlaid").click()
    page.wait_for_url(f"**/runs/{alpha}/metrics?overlay={beta}")
    fig = wait_chart(page, series_id("step", "entropy"), "gd.data.length >= 2")
    lines = [t for t in fig["data"] if t["meta"]["role"] == "raw"]  # the dots are no lines
    assert sorted(t["meta"]["run"] for t in lines) == [alpha, beta]


def test_no_runs_shows_how_to_send_the_first_metrics(page, dashboard):
    page.goto(dashboard.url + "/")
    page.wait_for_selector("#empty:not([hidden])")
    text = page.text_content("#empty")
    assert "createtoken --project" in text
    assert "/api/ingest" in text
