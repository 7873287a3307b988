"""A run's pages follow the run, in Chromium against a live server: an open Metrics
or Samples page of a run deleted elsewhere says so within seconds and stops saying live or
running; the old URL answers a page that says the run was deleted, with the way back; the
Samples page shows the run's real status apart from its live connection; a Hugging Face run
(steps 1..24) shows 24 of 24 steps; a run whose trainer goes silent turns crashed on an open
page without a reload."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from devtools.live_server import running
from ingest.core.series_ids import series_id
from tests.browser.conftest import Dashboard, step, wait_chart
from tests.browser.test_metrics_page import open_metrics
from tests.browser.test_overview import api_write
from tests.browser.test_samples_viewer import open_samples, samples

pytestmark = pytest.mark.browser

DELETED_WITHIN_MS = 5000


def start(run: str, total: int | None = None) -> dict[str, Any]:
    msg: dict[str, Any] = {"v": 1, "id": f"{run}-start", "type": "run.start", "run": run}
    if total is not None:
        msg["total_steps"] = total
    return msg


def end(run: str, status: str = "finished") -> dict[str, Any]:
    return {"v": 1, "id": f"{run}-end", "type": "run.end", "run": run, "status": status}


def says_live_or_running(page: Any, selector: str) -> bool:
    text = (page.text_content(selector) or "").lower()
    return "live" in text or "running" in text or "connected" in text


def assert_deleted_banner(page: Any) -> None:
    banner = page.locator("#deleted-banner")
    assert banner.text_content().startswith("This run was deleted")
    assert banner.locator("a").get_attribute("href") == "/"


def test_an_open_metrics_page_of_a_deleted_run_says_so_and_stops_being_live(page, dashboard):
    dashboard.post([start("doomed"), *(step("doomed", n, {"loss": 1.0 / (n + 1)})
                                       for n in range(10))])
    run_id = open_metrics(page, dashboard, "doomed")
    page.wait_for_function("document.querySelector('.run-chip .badge.status')?.textContent"
                           " === 'running'")
    page.wait_for_function("document.querySelector('#runbar .live-status').textContent !== ''")
    assert says_live_or_running(page, "#runbar")
    api_write(dashboard, "DELETE", f"/api/runs/{run_id}")
    page.wait_for_selector("#deleted-banner:not([hidden])", timeout=DELETED_WITHIN_MS)
    assert_deleted_banner(page)
    assert "doomed" in page.text_content("#deleted-banner")
    assert page.text_content(".run-chip .badge.status") == "deleted"
    assert not says_live_or_running(page, "#runbar")
    # And it stays so: the live client is stopped (its reconnect timer cleared, none set once
    # stopped) and its socket has closed, so nothing can bring "live" back.
    page.wait_for_function("() => { const live = window.telescope.live;"
                           " return live.closed && live.ws === null; }")
    assert not says_live_or_running(page, "#runbar")


def test_an_open_samples_page_of_a_deleted_run_says_so_and_stops_being_live(page, dashboard):
    dashboard.post([start("doomed-s"), samples("doomed-s", 0, [0.5, 1.0])])
    run_id = open_samples(page, dashboard, "doomed-s")
    page.wait_for_function("document.getElementById('live-status').textContent !== ''")
    assert page.text_content("#run-status") == "running"
    api_write(dashboard, "DELETE", f"/api/runs/{run_id}")
    page.wait_for_selector("#deleted-banner:not([hidden])", timeout=DELETED_WITHIN_MS)
    assert_deleted_banner(page)
    assert page.text_content("#run-status") == "deleted"
    assert not says_live_or_running(page, ".page-head")
    assert page.locator(".sample").count() == 2  # what was shown stays readable


def test_the_old_url_of_a_deleted_run_says_it_was_deleted_and_leads_back(page, dashboard):
    dashboard.post([start("gone"), step("gone", 0, {"loss": 1.0})])
    run_id = dashboard.run_id("gone")
    api_write(dashboard, "DELETE", f"/api/runs/{run_id}")
    for path in (f"/runs/{run_id}/metrics", f"/runs/{run_id}", f"/runs/{run_id}/samples"):
        res = page.goto(f"{dashboard.url}{path}")
        assert res.status == 404
        assert page.text_content("h1") == "This run was deleted"
        assert "“gone”" in page.text_content("#run-missing")
    page.click("text=Back to the run list")
    page.wait_for_url(f"{dashboard.url}/")
    res = page.goto(f"{dashboard.url}/runs/987654/metrics")
    assert res.status == 404 and page.text_content("h1") == "No run 987654"
    assert page.locator("#run-missing a[href='/']").count() == 1


def test_the_samples_page_of_a_finished_run_shows_finished_not_live(page, dashboard):
    dashboard.post([start("done"), samples("done", 0, [0.5, 1.0]), end("done")])
    open_samples(page, dashboard, "done")
    assert page.text_content("#run-status") == "finished"
    assert "finished" in (page.get_attribute("#run-status", "class") or "")
    page.wait_for_function("document.getElementById('live-status').textContent !== ''")
    badges = page.eval_on_selector_all(".badge", "els => els.map(e => e.textContent.trim())")
    assert not any("live" in b.lower() for b in badges), badges
    assert "badge" not in (page.get_attribute("#live-status", "class") or "")


def test_a_run_counting_steps_from_1_shows_24_of_24(page, dashboard):
    now = time.time()
    dashboard.post([start("hf", total=24),
                    *(step("hf", n, {"loss": 1.0 / n}, time=now - 24 + n) for n in range(1, 25))])
    run_id = dashboard.run_id("hf")
    page.goto(f"{dashboard.url}/runs/{run_id}")
    page.wait_for_selector("#progress .progress-text")
    assert page.text_content("#progress .progress-text") == "24 of 24 steps · 100%"
    assert page.get_attribute("#progress .progress-bar", "aria-valuenow") == "100"
    page.goto(dashboard.url + "/")
    page.wait_for_selector(f"tr[data-run-id='{run_id}'] td.progress small")
    assert page.text_content(f"tr[data-run-id='{run_id}'] td.progress small") == "24 / 24"
    assert page.get_attribute(f"tr[data-run-id='{run_id}'] .progress-bar",
                              "aria-valuenow") == "100"


# ------------------------------------------------------------------ crashed


@pytest.fixture
def quick_crash(live_state: Any) -> Iterator[Dashboard]:
    """A server on which a running run not heard of for 2 s is crashed."""
    live_state.env["TELESCOPE_CRASH_SECONDS"] = "2"
    with running(live_state) as server:
        yield Dashboard(server, server.state.token("browser"))


def test_a_silent_trainer_turns_crashed_on_open_pages_without_a_reload(page, quick_crash):
    dashboard = quick_crash
    now = time.time()
    dashboard.post([start("silent", total=100),
                    *(step("silent", n, {"loss": 1.0}, time=now - 10 + n) for n in range(10))])
    run_id = open_metrics(page, dashboard, "silent")
    page.wait_for_function("document.querySelector('.run-chip .badge.status')?.textContent"
                           " === 'running'")
    wait_chart(page, series_id("step", "loss"))
    time.sleep(2.5)  # the trainer says nothing more: crashed by the clock, no message at all
    assert dashboard.get(f"/api/runs/{run_id}")["status"] == "crashed"
    page.evaluate("() => window.telescope.follower.poll()")  # what its timer does every 15 s
    page.wait_for_function("document.querySelector('.run-chip .badge.status')?.textContent"
                           " === 'crashed'", timeout=5000)
    assert "crashed" in page.get_attribute(".run-chip .badge.status", "class")
    page.goto(f"{dashboard.url}/runs/{run_id}")
    page.wait_for_selector("#progress .badge.status.crashed")
    assert page.text_content("[data-field='eta']").startswith("— (crashed")
    page.goto(dashboard.url + "/?status=crashed")
    page.wait_for_selector(f"tr[data-run-id='{run_id}'] .badge.status.crashed")
    assert page.text_content(f"tr[data-run-id='{run_id}'] td.eta") == "—"
