"""The run overview page (/runs/<id>) in Chromium against a live server: status, progress,
ETA, headline charts, config tree, environments, notes; housekeeping (rename, notes, colour,
delete behind the typed name); live changes without a reload."""

from __future__ import annotations

import http.cookiejar
import json
import time
import urllib.request
from typing import Any

import pytest

from ingest.core.series_ids import series_id
from tests.browser.conftest import ARTIFACTS, Dashboard, step, wait_chart

pytestmark = pytest.mark.browser

ENVS = [{"name": "countdown", "weight": 0.5, "reward_min": 0.0, "reward_max": 2.0,
         "metrics_ranges": {"correct": {"min": 0, "max": 1}}},
        {"name": "math", "reward_max": 1.0}]
CONFIG = {"algorithm": "grpo", "lr": 1e-6, "optim": {"name": "adamw", "betas": [0.9, 0.95]},
          "data": {"max_len": 1024}}
LOSS = series_id("step", "loss")


def start(run: str, total: int = 10, config: Any = CONFIG) -> dict[str, Any]:
    return {"v": 1, "id": f"{run}-start", "type": "run.start", "run": run, "config": config,
            "environments": ENVS, "total_steps": total}


def steps(run: str, first: int, last: int, t0: float) -> list[dict[str, Any]]:
    """Steps 2 s apart in trainer time, ending about now (the run is running, with an ETA)."""
    return [step(run, n, {"loss": 1.0 / (n + 1), "grad_norm": 0.5}, time=t0 + 2.0 * n)
            for n in range(first, last + 1)]


def api_write(dashboard: Dashboard, method: str, path: str, body: Any = None) -> Any:
    """A page-style write: the CSRF cookie from a page, echoed in X-CSRFToken."""
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    opener.open(dashboard.url + "/", timeout=30).read()
    token = next(c.value for c in jar if c.name == "csrftoken")
    req = urllib.request.Request(
        dashboard.url + path, method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"X-CSRFToken": token, "Content-Type": "application/json"})
    with opener.open(req, timeout=30) as res:
        return json.loads(res.read())


def open_overview(page: Any, dashboard: Dashboard, run: str) -> int:
    run_id = dashboard.run_id(run)
    page.goto(f"{dashboard.url}/runs/{run_id}")
    page.wait_for_selector("#progress .badge.status")
    return run_id


def test_it_shows_status_progress_charts_config_environments_and_notes(page, dashboard):
    dashboard.post([start("ov"), *steps("ov", 0, 3, time.time() - 8)])
    run_id = dashboard.run_id("ov")
    api_write(dashboard, "PATCH", f"/api/runs/{run_id}", {
        "notes": "**lr** sweep, see [the doc](https://example.com/doc)\n\n"
                 "- one\n- <img src=x onerror=alert(1)>\n\n[bad](javascript:alert(2))"})
    open_overview(page, dashboard, "ov")
    assert page.text_content("#run-name") == "ov"
    assert page.text_content("#progress .badge.status") == "running"
    assert page.text_content(".progress-text") == "4 of 10 steps · 40%"
    assert page.get_attribute("#progress .progress-bar", "aria-valuenow") == "40"
    assert page.text_content("[data-field=last_step]") == "3"
    assert page.text_content("[data-field=eta]").startswith("in ")  # 6 steps × 2 s
    assert page.text_content("[data-field=rate]") == "0.50 steps/s (2 s per step)"

    # Headline charts: what the run has (loss, grad norm), titled by the registry.
    fig = wait_chart(page, LOSS)
    assert fig["data"][0]["x"] == [0, 1, 2, 3]
    titles = page.eval_on_selector_all(".headline-title", "els => els.map(e => e.textContent)")
    assert titles == ["loss", "Gradient norm"]

    # Config: a tree, searchable by key or value.
    leaves = page.eval_on_selector_all(".config-leaf", "els => els.map(e => e.dataset.path)")
    assert leaves == ["algorithm", "data.max_len", "lr", "optim.betas[0]", "optim.betas[1]",
                      "optim.name"]  # keys sorted: PostgreSQL's jsonb does not keep their order
    page.fill("input[aria-label='Search config']", "ADAM")
    page.wait_for_function("document.querySelectorAll('.config-leaf').length === 1")
    assert page.text_content(".config-count") == "1 match"
    assert page.text_content(".config-leaf mark") == "adam"
    page.fill("input[aria-label='Search config']", "betas")
    page.wait_for_function("document.querySelectorAll('.config-leaf').length === 2")

    # Environments with their declared ranges (an undeclared bound: observed).
    rows = page.eval_on_selector_all(".env-table tbody tr", "trs => trs.map(tr => "
                                     "[...tr.children].map(c => c.textContent))")
    assert rows == [["countdown", "0.5", "0 – 2", "correct 0 – 1"],
                    ["math", "—", "≤ 1 (min observed)", "—"]]

    # Notes: markdown, safely — the tag and the javascript: link stay text.
    notes = page.locator("#notes .notes-body").first
    assert notes.locator("strong").text_content() == "lr"
    assert notes.locator("a").evaluate_all("as => as.map(a => a.href)") == [
        "https://example.com/doc"]
    assert notes.locator("li").nth(1).text_content() == "<img src=x onerror=alert(1)>"
    assert "[bad](javascript:alert(2))" in notes.text_content()
    assert page.eval_on_selector_all("#notes img", "els => els.length") == 0
    assert page.get_attribute("a.button-link", "href") == f"/runs/{run_id}/metrics"


def test_a_live_status_and_step_change_show_without_reload(page, dashboard):
    t0 = time.time() - 8
    dashboard.post([start("lv"), *steps("lv", 0, 3, t0)])
    open_overview(page, dashboard, "lv")
    wait_chart(page, LOSS)
    page.evaluate("window.__sameDocument = true")
    dashboard.post(steps("lv", 4, 5, t0))
    page.wait_for_function("document.querySelector('[data-field=last_step]').textContent === '5'")
    assert page.text_content(".progress-text") == "6 of 10 steps · 60%"
    wait_chart(page, LOSS, "gd.data[0].x.length === 6")
    dashboard.post({"v": 1, "id": "lv-end", "type": "run.end", "run": "lv", "status": "failed"})
    page.wait_for_function(
        "document.querySelector('#progress .badge.status').textContent === 'failed'")
    assert page.text_content("[data-field=eta]") == "— (failed)"
    assert page.evaluate("window.__sameDocument") is True  # no reload happened


def test_rename_notes_and_colour_are_saved_and_shown(page, dashboard):
    dashboard.post([start("hk"), *steps("hk", 0, 1, time.time()),
                    step("other", 0, {"loss": 1.0})])
    run_id = open_overview(page, dashboard, "hk")

    page.fill("#hk-name", "other")  # another run's name: refused, said why
    page.click("text=Rename")
    page.wait_for_selector("#housekeeping .hk-status.bad")
    said = page.text_content("#housekeeping .hk-status")
    assert "another run of the project is called 'other'" in said
    page.fill("#hk-name", "hk renamed")
    page.click("text=Rename")
    page.wait_for_function("document.querySelector('#run-name').textContent === 'hk renamed'")
    assert page.text_content("#crumb-run") == "hk renamed"
    assert page.title().startswith("hk renamed")
    assert dashboard.get(f"/api/runs/{run_id}")["name"] == "hk renamed"

    page.click("text=Edit notes")
    page.fill("textarea[aria-label='Notes (markdown)']", "*warm-up* was `20` steps")
    page.wait_for_selector(".notes-preview em")
    page.click("text=Save notes")
    page.wait_for_selector("#notes .notes-body:not(.notes-preview) code")
    assert page.text_content("#notes .notes-body em") == "warm-up"
    assert dashboard.get(f"/api/runs/{run_id}")["notes"] == "*warm-up* was `20` steps"

    page.eval_on_selector("#hk-color", "e => { e.value = '#123456'; "
                                       "e.dispatchEvent(new Event('change')); }")
    page.wait_for_selector("text=Colour saved.")
    assert dashboard.get(f"/api/runs/{run_id}")["color"] == "#123456"
    wait_chart(page, LOSS, "gd.data[0].line.color === '#123456'")


def test_delete_needs_the_typed_name_then_removes_the_run(page, dashboard):
    dashboard.post([start("gone-soon"), *steps("gone-soon", 0, 1, time.time())])
    run_id = open_overview(page, dashboard, "gone-soon")
    page.click("text=Delete run…")
    dialog = page.locator("dialog.hk-dialog")
    assert dialog.is_visible()
    confirm = dialog.get_by_role("button", name="Delete this run")
    assert confirm.is_disabled()
    dialog.locator("input").fill("gone-soo")
    assert confirm.is_disabled()
    dialog.locator("input").press("Enter")  # submitting without the name deletes nothing
    assert dashboard.get(f"/api/runs/{run_id}")["name"] == "gone-soon"
    dialog.get_by_role("button", name="Cancel").click()
    assert not dialog.is_visible()
    page.click("text=Delete run…")
    assert dialog.locator("input").input_value() == ""  # the confirmation starts over
    dialog.locator("input").fill("gone-soon")
    assert confirm.is_enabled()
    confirm.click()
    page.wait_for_url(f"{dashboard.url}/")
    assert all(r["id"] != run_id for r in dashboard.get("/api/runs")["runs"])


def test_a_run_deleted_elsewhere_says_so_on_its_open_overview(page, dashboard):
    dashboard.post([start("elsewhere"), *steps("elsewhere", 0, 1, time.time())])
    run_id = open_overview(page, dashboard, "elsewhere")
    wait_chart(page, LOSS)
    api_write(dashboard, "DELETE", f"/api/runs/{run_id}")
    page.wait_for_selector("#deleted-banner:not([hidden])")
    assert "This run was deleted" in page.text_content("#deleted-banner")
    assert page.is_disabled("#hk-name") and page.is_disabled("text=Delete run…")


def test_screenshots_of_the_overview(browser, dashboard):
    from ingest.write.demo import demo_messages

    messages = list(demo_messages("grpo-demo", 60))
    messages[0] = {**messages[0], "total_steps": 150}
    for i in range(0, len(messages), 100):
        dashboard.post(messages[i:i + 100])
    run_id = dashboard.run_id("grpo-demo")
    api_write(dashboard, "PATCH", f"/api/runs/{run_id}", {
        "notes": "Baseline **GRPO** run, `lr` 1e-6.\n\n- countdown + math\n- see "
                 "[the plan](https://example.com/plan)"})
    ARTIFACTS.mkdir(exist_ok=True)
    for scheme in ("light", "dark"):
        ctx = browser.new_context(viewport={"width": 1400, "height": 1100}, color_scheme=scheme)
        pg = ctx.new_page()
        pg.goto(f"{dashboard.url}/runs/{run_id}")
        wait_chart(pg, series_id("reward", "reward", "mean"))
        pg.wait_for_function("document.querySelectorAll('.headline-card .main-svg').length >= 5")
        pg.screenshot(path=str(ARTIFACTS / f"overview-{scheme}.png"), full_page=True)
        ctx.close()
    assert (ARTIFACTS / "overview-light.png").stat().st_size > 10_000
