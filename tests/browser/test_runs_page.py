"""The runs page in Chromium against a live server: projects and runs with status, progress and
ETA; search by name or config value, filter by status, sort; compare configs side by side and
open runs overlaid; renames and deletions show live."""

from __future__ import annotations

import time
from typing import Any

import pytest

from ingest.core.series_ids import series_id
from tests.browser.conftest import ARTIFACTS, Dashboard, step, wait_chart
from tests.browser.test_overview import api_write

pytestmark = pytest.mark.browser


def start(run: str, config: Any, total: int | None = None) -> dict[str, Any]:
    msg = {"v": 1, "id": f"{run}-start", "type": "run.start", "run": run, "config": config}
    if total:
        msg["total_steps"] = total
    return msg


def end(run: str, status: str = "finished") -> dict[str, Any]:
    return {"v": 1, "id": f"{run}-end", "type": "run.end", "run": run, "status": status}


def visible_runs(page: Any) -> list[str]:
    """Names of the rows shown, in order."""
    return page.eval_on_selector_all(
        "tr[data-run-id]", "trs => trs.filter(tr => !tr.hidden && !tr.closest('section').hidden)"
        ".map(tr => tr.querySelector('td.run-name a').textContent)")


def wait_visible(page: Any, names: list[str]) -> None:
    page.wait_for_function(
        """want => JSON.stringify([...document.querySelectorAll('tr[data-run-id]')]
             .filter(tr => !tr.hidden && !tr.closest('section').hidden)
             .map(tr => tr.querySelector('td.run-name a').textContent)) === JSON.stringify(want)""",
        arg=names, timeout=10_000)


def cell(page: Any, run_id: int, css: str) -> str:
    return page.text_content(f"tr[data-run-id='{run_id}'] {css}")


def test_it_lists_projects_and_runs_and_opens_selected_runs_overlaid(page, dashboard):
    dashboard.post([step("alpha", n, {"entropy": 1.0}) for n in range(3)]
                   + [step("beta", n, {"entropy": 2.0}) for n in range(7)] + [end("beta")])
    alpha, beta = dashboard.run_id("alpha"), dashboard.run_id("beta")
    page.goto(dashboard.url + "/")
    page.wait_for_selector(f"tr[data-run-id='{beta}']")
    assert page.text_content("section.project h2") == "browser"
    assert cell(page, alpha, ".badge") == "running"
    assert cell(page, alpha, "td.step") == "2"
    assert cell(page, beta, ".badge") == "finished"
    assert cell(page, beta, "td.step") == "6"
    assert page.get_attribute(f"tr[data-run-id='{alpha}'] td.run-name a", "href") == \
        f"/runs/{alpha}"

    # A run that starts while the page is open appears without a reload.
    dashboard.post(step("gamma", 0, {"entropy": 3.0}))
    page.wait_for_selector(f"tr[data-run-id='{dashboard.run_id('gamma')}']", timeout=10_000)

    page.get_by_label("Select run alpha").check()
    assert page.is_disabled("text=Compare configs")  # comparing needs two
    page.get_by_label("Select run beta").check()
    page.get_by_role("button", name="Open 2 runs overlaid").click()
    page.wait_for_url(f"**/runs/{beta}/metrics?overlay={alpha}")  # in the order shown
    fig = wait_chart(page, series_id("step", "entropy"),  # a line per run (a run's last-point
                     # dot is a trace too: two traces may be one run's line and dot)
                     "gd.data.filter(t => t.meta && t.meta.role === 'raw').length >= 2")
    lines = [t for t in fig["data"] if t["meta"]["role"] == "raw"]  # the dots are no lines
    assert sorted(t["meta"]["run"] for t in lines) == [alpha, beta]


def test_progress_and_eta_are_shown(page, dashboard):
    now = time.time()
    dashboard.post([start("paced", {}, total=10)]
                   + [step("paced", n, {"x": 1.0}, time=now - 6 + 2 * n) for n in range(4)]
                   + [step("open-ended", 0, {"x": 1.0})])
    paced, open_ended = dashboard.run_id("paced"), dashboard.run_id("open-ended")
    page.goto(dashboard.url + "/")
    page.wait_for_selector(f"tr[data-run-id='{open_ended}']")
    assert cell(page, paced, "td.progress small") == "4 / 10"
    assert page.get_attribute(f"tr[data-run-id='{paced}'] .progress-bar", "aria-valuenow") == "40"
    assert cell(page, paced, "td.eta") == "12 s"  # 6 steps left × 2 s
    assert cell(page, open_ended, "td.eta") == "—"
    assert page.is_hidden(f"tr[data-run-id='{open_ended}'] .progress-bar")


def three_runs(dashboard: Dashboard) -> dict[str, int]:
    dashboard.post([start("grpo-a", {"algo": "grpo", "lr": 0.001, "optim": {"name": "adamw"}}),
                    step("grpo-a", 0, {"x": 1.0}), step("grpo-a", 1, {"x": 1.0}), end("grpo-a"),
                    start("grpo-b", {"algo": "grpo", "lr": 0.002, "optim": {"name": "adamw"},
                                     "seed": 7}),
                    step("grpo-b", 0, {"x": 1.0}),
                    start("dpo-c", {"algo": "dpo", "lr": 0.001, "optim": {"name": "lion"}}),
                    step("dpo-c", 0, {"x": 1.0}), step("dpo-c", 1, {"x": 1.0}),
                    step("dpo-c", 2, {"x": 1.0}), end("dpo-c", "failed")])
    return {n: dashboard.run_id(n) for n in ("grpo-a", "grpo-b", "dpo-c")}


def test_search_by_name_or_config_filter_by_status_and_sort(page, dashboard):
    three_runs(dashboard)
    page.goto(dashboard.url + "/")
    wait_visible(page, ["dpo-c", "grpo-b", "grpo-a"])  # newest update first

    search = page.get_by_label("Search runs by name or config value")
    search.fill("grpo")
    wait_visible(page, ["grpo-b", "grpo-a"])
    search.fill("lion")  # a config value
    wait_visible(page, ["dpo-c"])
    search.fill("lr=1e-3")  # a key and its value, numbers compared as numbers
    wait_visible(page, ["dpo-c", "grpo-a"])
    assert page.text_content(".runs-tools .count") == "2 of 3 runs"
    search.fill("lr=1e-3 grpo")
    wait_visible(page, ["grpo-a"])
    search.fill("")
    wait_visible(page, ["dpo-c", "grpo-b", "grpo-a"])

    page.select_option("select[name=status]", "finished")
    wait_visible(page, ["grpo-a"])
    page.select_option("select[name=status]", "failed")
    wait_visible(page, ["dpo-c"])
    page.select_option("select[name=status]", "")

    page.select_option("select[name=sort]", "name")
    wait_visible(page, ["dpo-c", "grpo-a", "grpo-b"])
    page.click("button.tool")  # the other way round
    wait_visible(page, ["grpo-b", "grpo-a", "dpo-c"])
    page.select_option("select[name=sort]", "step")
    wait_visible(page, ["grpo-b", "grpo-a", "dpo-c"])  # reversed: fewest steps first
    # The choice is in the URL: a reload (or a shared link) keeps it.
    search.fill("grpo")
    page.wait_for_url("**/?q=grpo&sort=step&reverse=1")
    page.reload()
    wait_visible(page, ["grpo-b", "grpo-a"])
    assert page.get_by_label("Search runs by name or config value").input_value() == "grpo"


def test_compare_highlights_config_differences_and_opens_the_overlay(page, dashboard):
    ids = three_runs(dashboard)
    page.goto(dashboard.url + "/")
    wait_visible(page, ["dpo-c", "grpo-b", "grpo-a"])
    page.get_by_label("Select run grpo-a").check()
    page.get_by_label("Select run grpo-b").check()
    page.click("text=Compare configs")
    page.wait_for_selector(".compare-table")
    heads = page.eval_on_selector_all(".compare-table thead th",
                                      "ths => ths.map(t => t.textContent)")
    assert heads == ["Key", "grpo-b", "grpo-a"]
    rows = page.eval_on_selector_all(
        ".compare-table tbody tr", "trs => trs.map(tr => [tr.dataset.path, "
        "tr.classList.contains('differs'), "
        "[...tr.querySelectorAll('td')].map(td => td.textContent)])")
    assert rows == [["algo", False, ["grpo", "grpo"]], ["lr", True, ["0.002", "0.001"]],
                    ["optim.name", False, ["adamw", "adamw"]], ["seed", True, ["7", "absent"]]]
    assert page.text_content(".compare-summary") == "4 keys, 2 differ"
    page.check("input[name=only-differences]")
    shown = page.eval_on_selector_all(".compare-table tbody tr:not([hidden])",
                                      "trs => trs.map(tr => tr.dataset.path)")
    assert shown == ["lr", "seed"]
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "runs-compare.png"), full_page=True)
    page.click(".compare a.button-link")
    page.wait_for_url(f"**/runs/{ids['grpo-b']}/metrics?overlay={ids['grpo-a']}")
    fig = wait_chart(page, series_id("step", "x"),
                     "gd.data.filter(t => t.meta.role === 'raw').length === 2")
    assert sorted(t["meta"]["run"] for t in fig["data"] if t["meta"]["role"] == "raw") == sorted(
        [ids["grpo-a"], ids["grpo-b"]])


def test_renames_recolours_and_deletions_show_without_reload(page, dashboard):
    dashboard.post([step("one", 0, {"x": 1.0}), step("two", 0, {"x": 1.0})])
    one, two = dashboard.run_id("one"), dashboard.run_id("two")
    page.goto(dashboard.url + "/")
    page.wait_for_selector(f"tr[data-run-id='{two}']")
    page.evaluate("window.__sameDocument = true")
    api_write(dashboard, "PATCH", f"/api/runs/{one}", {"name": "one-renamed", "color": "#0a0b0c"})
    page.wait_for_function(f"document.querySelector(\"tr[data-run-id='{one}'] td.run-name a\")"
                           ".textContent === 'one-renamed'")
    page.wait_for_function(f"document.querySelector(\"tr[data-run-id='{one}'] input[type=color]\")"
                           ".value === '#0a0b0c'")
    page.get_by_label("Select run two").check()
    api_write(dashboard, "DELETE", f"/api/runs/{two}")
    page.wait_for_selector(f"tr[data-run-id='{two}']", state="detached")
    assert page.is_disabled("text=Open selected")  # the deleted run left the selection
    assert page.evaluate("window.__sameDocument") is True


def test_no_runs_shows_how_to_send_the_first_metrics(page, dashboard):
    page.goto(dashboard.url + "/")
    page.wait_for_selector("#empty:not([hidden])")
    text = page.text_content("#empty")
    assert "telescope token " in text  # the command every install has
    assert "/api/ingest" in text
