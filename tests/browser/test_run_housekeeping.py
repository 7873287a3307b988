"""Housekeeping of a run in Chromium (issue 31): the delete confirmation's field is an input's
height; a recolour to a colour another run of the project has is warned, with a free colour
offered; Markdown tables in notes render as tables (their cells as text); tags set on the
overview filter the run list, whose headline column shows each run's latest reward mean; the
overview's export button downloads every series as CSV."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

import pytest

from ingest.write.demo import demo_messages
from tests.browser.conftest import Dashboard, step
from tests.browser.test_overview import api_write, open_overview

pytestmark = pytest.mark.browser


def two_runs(dashboard: Dashboard) -> tuple[int, int]:
    dashboard.post([step("one", n, {"loss": 1.0 / (n + 1)}) for n in range(3)]
                   + [step("two", n, {"loss": 2.0}) for n in range(2)])
    return dashboard.run_id("one"), dashboard.run_id("two")


def test_the_delete_confirmation_field_is_one_line_high(page: Any, dashboard: Dashboard) -> None:
    two_runs(dashboard)
    open_overview(page, dashboard, "one")
    page.get_by_role("button", name="Delete run…").click()
    field = page.get_by_label("Type the run name to confirm")
    field.wait_for()
    box = field.bounding_box()
    rename = page.locator("#hk-name").bounding_box()
    assert box["height"] <= rename["height"] + 4, (box, rename)
    assert box["height"] < 40


def test_a_recolour_to_a_colour_taken_in_the_project_is_warned(page: Any,
                                                               dashboard: Dashboard) -> None:
    one, two = two_runs(dashboard)
    taken = dashboard.get(f"/api/runs/{two}")["color"]
    open_overview(page, dashboard, "one")
    swatch = page.get_by_label("Run colour")
    # The picker suggests only colours no other run of the project has.
    swatch.focus()
    page.wait_for_function("""taken => { const l = document.getElementById(
        document.getElementById('hk-color').getAttribute('list'));
        return l && l.options.length > 0 && ![...l.options].some(o => o.value === taken); }""",
                           arg=taken)
    swatch.evaluate("(el, c) => { el.value = c; el.dispatchEvent(new Event('change')); }", taken)
    warning = page.locator(".color-clash[role=alert]")
    warning.wait_for()
    assert "run two of this project already has this colour" in warning.text_content().lower()
    assert dashboard.get(f"/api/runs/{one}")["color"] != taken  # nothing saved yet
    free = warning.locator("button.color-free")
    offered = free.get_attribute("data-color")
    assert offered not in {taken, dashboard.get(f"/api/runs/{one}")["color"]} or offered
    free.click()
    page.wait_for_function("c => document.getElementById('hk-color').value === c", arg=offered)
    assert dashboard.get(f"/api/runs/{one}")["color"] == offered != taken
    assert warning.is_hidden()


def test_markdown_tables_in_notes_render_as_tables(page: Any, dashboard: Dashboard) -> None:
    one, _ = two_runs(dashboard)
    notes = ("Sweep:\n\n| lr | reward | note |\n|:---|---:|:-:|\n| 1e-6 | **0.81** | "
             "<img src=x onerror=alert(1)> |\n| 3e-6 | 0.77 | a \\| b |\n")
    api_write(dashboard, "PATCH", f"/api/runs/{one}", {"notes": notes})
    open_overview(page, dashboard, "one")
    table = page.locator("#notes table")
    table.wait_for()
    cells = table.evaluate("t => [...t.rows].map(r => [...r.cells].map(c => c.textContent))")
    assert cells == [["lr", "reward", "note"], ["1e-6", "0.81", "<img src=x onerror=alert(1)>"],
                     ["3e-6", "0.77", "a | b"]]
    assert table.locator("img").count() == 0  # text, never markup
    assert table.locator("tbody strong").text_content() == "0.81"
    aligns = table.evaluate("t => [...t.rows[1].cells].map(c => getComputedStyle(c).textAlign)")
    assert aligns == ["left", "right", "center"]


def test_tags_from_the_overview_filter_the_run_list_with_its_headline(
        page: Any, dashboard: Dashboard) -> None:
    dashboard.post(list(demo_messages("demo", 4, seed=3)))
    two_runs(dashboard)
    demo = dashboard.run_id("demo")
    open_overview(page, dashboard, "demo")
    page.get_by_label("Add tags (comma-separated)").fill("baseline, lr-sweep")
    page.get_by_role("button", name="Add", exact=True).click()
    page.wait_for_selector("#housekeeping .tag[data-tag='lr-sweep']")
    assert dashboard.get(f"/api/runs/{demo}")["tags"] == ["baseline", "lr-sweep"]
    page.get_by_role("button", name="Remove tag baseline").click()
    page.wait_for_selector("#housekeeping .tag[data-tag='baseline']", state="detached")
    assert dashboard.get(f"/api/runs/{demo}")["tags"] == ["lr-sweep"]

    # The chip leads to the run list filtered by the tag.
    page.click("#housekeeping .tag[data-tag='lr-sweep'] a")
    page.wait_for_url("**/?tag=lr-sweep")
    page.wait_for_function("""() => { const rows = [...document.querySelectorAll('tr[data-run-id]')]
        .filter(tr => !tr.hidden); return rows.length === 1; }""")
    shown = page.eval_on_selector_all("tr[data-run-id]", "trs => trs.filter(tr => !tr.hidden)"
                                      ".map(tr => tr.querySelector('td.run-name a').textContent)")
    assert shown == ["demo"]
    assert page.input_value("select[name=tag]") == "lr-sweep"

    # The headline column: the latest reward mean, as the server has it.
    latest = dashboard.get("/api/runs?headline=")["runs"]
    want = next(r["headline"] for r in latest if r["id"] == demo)
    cell = page.locator(f"tr[data-run-id='{demo}'] td.headline")
    assert float(cell.text_content()) == pytest.approx(want["value"], rel=1e-3)
    assert page.locator("th.headline").first.text_content() == "Reward mean"
    page.select_option("select[name=tag]", "")
    page.wait_for_function("document.querySelectorAll('tr[data-run-id]:not([hidden])').length"
                           " === 3")
    one = dashboard.run_id("one")
    assert page.locator(f"tr[data-run-id='{one}'] td.headline").text_content() == "—"

    # Another series for the column: offered from the runs' catalogs, kept in the URL.
    page.focus("select[name=headline]")
    page.wait_for_selector("select[name=headline] option[value='step|loss||']", state="attached")
    page.select_option("select[name=headline]", "step|loss||")
    page.wait_for_function(f"""document.querySelector("tr[data-run-id='{one}'] td.headline")
        .textContent === '0.3333'""")
    assert page.locator("th.headline").first.text_content() == "Loss"
    assert "headline=step%7Closs%7C%7C" in page.url


def test_the_overview_exports_every_series_as_csv(page: Any, dashboard: Dashboard) -> None:
    one, _ = two_runs(dashboard)
    open_overview(page, dashboard, "one")
    with page.expect_download() as info:
        page.get_by_role("link", name="Export CSV").click()
    download = info.value
    assert download.suggested_filename == f"run-{one}.csv"
    text = Path(download.path()).read_bytes()
    assert text.startswith(b"series,kind,key,stat,env,step,time,value\n"), text[:200]
    rows = list(csv.DictReader(io.StringIO(text.decode())))
    assert [(r["key"], int(r["step"]), float(r["value"])) for r in rows if r["key"] == "loss"] \
        == [("loss", n, 1.0 / (n + 1)) for n in range(3)]
