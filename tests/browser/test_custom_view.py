"""The Custom view in Chromium: a dashboard built from the metric list by button, drag and drop
and keyboard, saved on the server for the project, and shown again for another of its runs."""

from __future__ import annotations

import time

import pytest

from ingest.series_ids import series_id
from tests.browser.conftest import ARTIFACTS, step, wait_chart
from tests.browser.test_metrics_page import open_metrics

pytestmark = pytest.mark.browser

ENTROPY, GRAD, LOSS = (series_id("step", k) for k in ("entropy", "grad_norm", "loss/policy"))


def board(pg) -> list[str]:
    return pg.eval_on_selector_all(".board > .chart", "els => els.map(e => e.dataset.layoutId)")


def item(sid: str) -> str:
    return f".palette-item[data-metric-id='{sid}']"


def card(sid: str) -> str:
    return f".board [data-layout-id='{sid}']"


def saved(pg, dashboard, run_id: int) -> list[dict]:
    pg.wait_for_function("document.querySelector('.save-status').textContent === 'Saved'")
    return dashboard.get(f"/api/runs/{run_id}/layout")["charts"]


def test_a_dashboard_is_built_by_drag_and_drop_and_kept_for_the_project(page, dashboard):
    dashboard.post([step("c1", n, {"entropy": 1.0 + n, "grad_norm": 0.5 * n + 1,
                                   "loss/policy": 0.1 * n + 1}) for n in range(5)]
                   + [step("c2", n, {"entropy": 3.0 + n}) for n in range(3)])
    c1 = open_metrics(page, dashboard, "c1", "?view=custom")
    page.wait_for_selector(item(LOSS))
    assert page.is_visible(".board-hint") and board(page) == []
    assert page.get_attribute(".view-tabs a[data-view='custom']", "aria-current") == "page"

    page.click(f"{item(ENTROPY)} button.add")  # the button
    wait_chart(page, ENTROPY)
    assert page.text_content(f"{item(ENTROPY)} button.add") == "Added"
    width = page.eval_on_selector(".board", "e => e.clientWidth")
    page.drag_and_drop(item(GRAD), ".board", target_position={"x": width - 5, "y": 5})
    wait_chart(page, GRAD)
    assert board(page) == [ENTROPY, GRAD]  # dropped on free space: at the end
    page.drag_and_drop(item(LOSS), card(ENTROPY))  # dropped on a card: before it
    assert board(page) == [LOSS, ENTROPY, GRAD]
    page.drag_and_drop(f"{card(GRAD)} .chart-head", card(LOSS))  # a card moved by its header
    assert board(page) == [GRAD, LOSS, ENTROPY]
    page.focus(f"{card(GRAD)} button[title='Move later']")  # and from the keyboard
    page.keyboard.press("Enter")
    assert board(page) == [LOSS, GRAD, ENTROPY]
    page.click(f"{card(ENTROPY)} button[title='Toggle wide']")
    page.click(f"{card(ENTROPY)} button[title='Chart settings']")
    page.check(f"{card(ENTROPY)} input[name=logY]")
    wait_chart(page, ENTROPY, "gd.layout.yaxis.type === 'log'")
    layout = saved(page, dashboard, c1)
    assert [c["id"] for c in layout] == [LOSS, GRAD, ENTROPY]
    assert layout[2] == {"id": ENTROPY, "wide": True, "settings": {"logY": True}}
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "custom-view.png"))

    # Another run of the project: the same dashboard, its own data; a chart it lacks says so.
    c2 = open_metrics(page, dashboard, "c2", "?view=custom")
    fig = wait_chart(page, ENTROPY)
    assert fig["layout"]["yaxis"]["type"] == "log"
    assert next(t for t in fig["data"] if t["meta"]["role"] == "raw")["y"] == [3.0, 4.0, 5.0]
    assert board(page) == [LOSS, GRAD, ENTROPY]
    assert "wide" in page.get_attribute(card(ENTROPY), "class")
    assert page.text_content(f"{card(LOSS)} .chart-note") == "Not in the runs shown (yet)."
    page.click(f"{card(LOSS)} button[title='Remove']")
    assert board(page) == [GRAD, ENTROPY]
    assert [c["id"] for c in saved(page, dashboard, c2)] == [GRAD, ENTROPY]

    # The search box filters the metric list and the board; the All view is unchanged.
    page.fill("input[type=search]", "no such metric")
    page.wait_for_function(f"document.querySelector(\"{item(ENTROPY)}\").hidden")
    assert page.is_hidden(card(ENTROPY))
    page.fill("input[type=search]", "entro")
    page.wait_for_function(f"!document.querySelector(\"{item(ENTROPY)}\").hidden")
    assert page.is_visible(card(ENTROPY))
    page.fill("input[type=search]", "")
    page.click(".view-tabs a[data-view='all']")
    page.wait_for_url(lambda url: url.endswith("view=all"))
    wait_chart(page, ENTROPY)
    assert page.eval_on_selector_all("section.section", "els => els.length") >= 1


def test_a_chart_of_the_layout_appears_when_its_metric_first_arrives(page, dashboard):
    dashboard.post([step("later", 0, {"entropy": 1.0})])
    run_id = open_metrics(page, dashboard, "later", "?view=custom")
    page.wait_for_selector(item(ENTROPY))
    page.click(f"{item(ENTROPY)} button.add")
    wait_chart(page, ENTROPY)
    # Put a metric the run does not have yet on the dashboard through the API's own client.
    page.evaluate("""async ([runId, ids]) => {
        const token = document.cookie.split('; ').find(c => c.startsWith('csrftoken=')).slice(10);
        const body = JSON.stringify({charts: ids.map(id => ({id}))});
        await fetch(`/api/runs/${runId}/layout`, {method: 'PUT', body,
          headers: {'X-CSRFToken': token, 'Content-Type': 'application/json'}});
    }""", [run_id, [ENTROPY, series_id("step", "kl")]])
    page.reload()
    page.wait_for_selector(card(series_id("step", "kl")) + ".missing")
    trainer = dashboard.ingest_socket()
    try:
        trainer.send(step("later", 1, {"entropy": 2.0, "kl": 0.25}))
    finally:
        trainer.close()
    fig = wait_chart(page, series_id("step", "kl"))
    assert next(t for t in fig["data"] if t["meta"]["role"] == "raw")["y"] == [0.25]
    deadline = time.monotonic() + 5
    while page.query_selector(".board .chart.missing") is not None:
        assert time.monotonic() < deadline, "the placeholder stayed"
        time.sleep(0.05)


def test_edits_are_saved_before_leaving_and_never_overwrite_a_newer_dashboard(page, dashboard):
    dashboard.post([step("s1", n, {"entropy": 1.0 + n, "grad_norm": 2.0 + n}) for n in range(3)])
    run_id = open_metrics(page, dashboard, "s1", "?view=custom")
    page.wait_for_selector(item(GRAD))
    page.drag_and_drop(item(ENTROPY), ".board-hint")  # the empty board's hint takes drops too
    page.click(f"{item(GRAD)} button.add")
    assert board(page) == [ENTROPY, GRAD]
    saved(page, dashboard, run_id)
    # Removing moves the focus on to the next chart, so the keyboard user is not lost.
    page.focus(f"{card(ENTROPY)} button[title='Remove']")
    page.keyboard.press("Enter")
    assert board(page) == [GRAD]
    assert page.evaluate("document.activeElement.closest('.chart')?.dataset.layoutId") == GRAD
    # An edit in the last moment before switching views is saved, not dropped.
    page.click(f"{card(GRAD)} button[title='Toggle wide']")
    page.click(".view-tabs a[data-view='all']")
    page.wait_for_url(lambda url: url.endswith("view=all"))
    assert dashboard.get(f"/api/runs/{run_id}/layout")["charts"] == [
        {"id": GRAD, "wide": True, "settings": {}}]

    # Another page saves meanwhile: this page's next edit is refused and says so.
    open_metrics(page, dashboard, "s1", "?view=custom")
    page.wait_for_selector(card(GRAD))
    page.evaluate("""async (runId) => {
        const token = document.cookie.split('; ').find(c => c.startsWith('csrftoken=')).slice(10);
        await fetch(`/api/runs/${runId}/layout`, {method: 'PUT', body: '{"charts": []}',
          headers: {'X-CSRFToken': token, 'Content-Type': 'application/json'}});
    }""", run_id)
    page.click(f"{item(ENTROPY)} button.add")
    page.wait_for_function(
        "document.querySelector('.save-status').textContent.includes('changed elsewhere')")
    assert dashboard.get(f"/api/runs/{run_id}/layout")["charts"] == []


def test_a_project_keeps_several_named_dashboards(page, dashboard):
    dashboard.post([step("n1", n, {"entropy": 1.0 + n, "grad_norm": 2.0 + n}) for n in range(3)])
    run_id = open_metrics(page, dashboard, "n1", "?view=custom")
    page.wait_for_selector(item(ENTROPY))
    page.click(f"{item(ENTROPY)} button.add")
    saved(page, dashboard, run_id)

    page.click("button:text('New…')")  # a second dashboard, empty until its first chart
    page.fill("input[name=dashboard]", "Perf")
    page.keyboard.press("Enter")
    page.wait_for_url(lambda url: "dashboard=Perf" in url)
    page.wait_for_selector(item(GRAD))
    assert board(page) == []
    page.click(f"{item(GRAD)} button.add")
    page.wait_for_function("document.querySelector('.save-status').textContent === 'Saved'")
    assert page.eval_on_selector_all(".dashboard-picker option", "os => os.map(o => o.value)") \
        == ["default", "Perf"]

    page.click("button:text('Rename…')")
    page.fill("input[name=dashboard]", "Perf & timing")
    page.keyboard.press("Enter")
    page.wait_for_function("document.querySelector('.save-status').textContent === 'Renamed'")
    assert "dashboard=Perf+%26+timing" in page.url or "dashboard=Perf%20%26%20timing" in page.url
    got = dashboard.get(f"/api/runs/{run_id}/layout?name=Perf%20%26%20timing")
    assert [c["id"] for c in got["charts"]] == [GRAD]

    page.select_option(".dashboard-picker", "default")  # switching keeps each one's charts
    page.wait_for_url(lambda url: "dashboard=" not in url)
    wait_chart(page, ENTROPY)
    assert board(page) == [ENTROPY]
    page.select_option(".dashboard-picker", "Perf & timing")
    wait_chart(page, GRAD)
    page.once("dialog", lambda d: d.accept())
    page.click("button:text('Delete')")
    page.wait_for_url(lambda url: "dashboard=" not in url)
    page.wait_for_selector(card(ENTROPY))
    assert dashboard.get(f"/api/runs/{run_id}/layout")["names"] == ["default"]
