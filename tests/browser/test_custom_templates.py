"""Dashboards and templates of the Custom view in Chromium: a project's named dashboards (new,
rename, switch, delete), a dashboard saved as a template and started from, the built-in "GRPO
health" starter, and a dashboard exported as JSON and imported again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.browser.conftest import step
from tests.browser.test_custom_view import (
    board,
    card,
    group,
    node,
    open_custom,
    plot,
    section,
    stored,
)

pytestmark = pytest.mark.browser

KL = {"id": "step|train%2Fkl_mean||", "axis": "auto"}
DESIGN = {"version": 2, "sections": [
    section("s1", "Policy",
            {**plot("p1", "entropy"), "title": "My entropy", "wide": True,
             "settings": {"logY": True}},
            group("g1", "Drift", {**plot("p2", "kl_divergence_inference"),
                                  "series": [{"id": "step|kl_divergence_inference||",
                                              "axis": "left"}, KL]})),
    section("s2", "Speed", plot("p3", "grad_norm"), collapsed=True),
]}
SHAPE = [["Policy", ["My entropy", ["Drift", ["KL to rollout policy, KL to reference (mean)"]]]],
         ["Speed", ["Gradient norm"]]]


def feed(dashboard, run: str) -> None:
    dashboard.post([step(run, n, {"entropy": 1.0 + n, "grad_norm": 2.0 + n, "train/kl_mean": 0.1,
                                  "kl_divergence_inference": 0.2, "train/clip_frac": 0.01})
                    for n in range(3)])


def new_dashboard(pg, name: str, template: str | None = None) -> None:
    pg.click(".dashboards button:text('New…')")
    pg.fill("input[name=dashboard]", name)
    if template is not None:
        pg.wait_for_selector(f"select[name=template] option[value='{template}']", state="attached")
        pg.select_option("select[name=template]", template)
    pg.keyboard.press("Enter")
    pg.wait_for_url(lambda url: f"dashboard={name.replace(' ', '+')}" in url
                    or f"dashboard={name.replace(' ', '%20')}" in url)
    pg.wait_for_selector(".palette-section")


def test_a_dashboard_becomes_a_template_and_travels_as_json(page, dashboard, tmp_path: Path):
    feed(dashboard, "t1")
    run_id = open_custom(page, dashboard, "t1", DESIGN)
    page.wait_for_selector(card("My entropy"))
    assert board(page) == SHAPE

    page.click(".dashboards button:text('Save as template…')")
    page.fill("input[name=dashboard]", "Mine")
    page.keyboard.press("Enter")
    page.wait_for_function("document.querySelector('.save-status').textContent"
                           " === 'Saved as template “Mine”'")
    new_dashboard(page, "Copy", "Mine")  # the template: the same dashboard, settings and all
    page.wait_for_selector(card("My entropy"))
    assert board(page) == SHAPE
    copy = dashboard.get(f"/api/runs/{run_id}/layout?name=Copy")
    assert copy["sections"] == DESIGN["sections"]
    page.wait_for_function(f"""document.querySelector("{node('p1')} .plot")
        ?.layout?.yaxis?.type === 'log'""")
    assert page.get_attribute(".dash-section[data-node-id=s2] .section-toggle",
                              "aria-expanded") == "false"

    with page.expect_download() as got:  # export ...
        page.click(".dashboards button:text('Export')")
    path = tmp_path / "copy.json"
    got.value.save_as(path)
    doc = json.loads(path.read_text())
    assert (doc["telescope"], doc["name"], doc["version"]) == ("dashboard", "Copy", 2)
    assert doc["sections"] == DESIGN["sections"]
    page.set_input_files(".dashboards input[type=file]", str(path))  # ... and import
    page.wait_for_url(lambda url: "Copy+%282%29" in url or "Copy%20(2)" in url)
    page.wait_for_selector(card("My entropy"))
    assert board(page) == SHAPE
    assert stored(dashboard, run_id, None, "Copy (2)") == stored(dashboard, run_id)

    # A file of the version before sections imports too (migrated).
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"charts": [{"id": "step|grad_norm||", "wide": True}]}))
    page.set_input_files(".dashboards input[type=file]", str(old))
    page.wait_for_url(lambda url: "dashboard=old" in url)
    page.wait_for_selector(card("Gradient norm"))
    assert board(page) == [["Charts", ["Gradient norm"]]]

    page.click(".dashboards button:text('New…')")  # a template is deleted from the New form
    page.wait_for_selector("select[name=template] option[value='Mine']", state="attached")
    page.select_option("select[name=template]", "Mine")
    page.once("dialog", lambda d: d.accept())
    page.click("button:text('Delete template')")
    page.wait_for_selector("select[name=template] option[value='Mine']", state="detached")
    names = [t["name"] for t in dashboard.get(f"/api/runs/{run_id}/templates")["templates"]]
    assert names == ["GRPO health"]


def test_a_new_dashboard_starts_from_the_grpo_health_template(page, dashboard):
    feed(dashboard, "h1")
    run_id = open_custom(page, dashboard, "h1")
    assert page.is_visible(".board-hint")
    new_dashboard(page, "Health", "GRPO health")
    page.wait_for_selector(card("KL"))
    assert board(page) == [
        ["Signal", ["Reward", "Informative groups", "Truncation"]],
        ["Policy", [["Drift", ["KL", "Entropy"]], ["Update", ["Gradient norm", "Clip fraction"]]]]]
    # A plot draws the keys this run logs; what it lacks is named, not drawn.
    kl = node("p4")
    page.wait_for_function(f"""document.querySelector("{kl} .plot")?.data
        ?.filter(t => t.meta?.role === 'raw').length === 2""")
    missing = page.eval_on_selector_all(f"{kl} .plot-series li.missing",
                                        "els => els.map(e => e.dataset.series)")
    assert missing == ["step|train%2Fkl_max||"]
    assert page.locator(f"{node('p1')}.missing").count() == 1  # no samples: no reward yet
    assert dashboard.get(f"/api/runs/{run_id}/layout?name=Health")["names"] == ["Health"]


def test_a_project_keeps_several_named_dashboards(page, dashboard):
    feed(dashboard, "n1")
    run_id = open_custom(page, dashboard, "n1", {"version": 2, "sections": [
        section("s1", "Main", plot("p1", "entropy"))]})
    new_dashboard(page, "Perf")  # empty until its first plot
    assert board(page) == [] and page.is_visible(".board-hint")
    page.fill(".palette-search", "grad")
    page.click(".palette-item[data-metric-id='step|grad_norm||'] button.add")
    assert board(page) == [["General", ["Gradient norm"]]]
    page.wait_for_function("document.querySelector('.save-status').textContent === 'Saved'")
    assert page.eval_on_selector_all(".dashboard-picker option", "os => os.map(o => o.value)") \
        == ["default", "Perf"]

    page.click(".dashboards button:text('Rename…')")
    page.fill("input[name=dashboard]", "Perf & timing")
    page.keyboard.press("Enter")
    page.wait_for_function("document.querySelector('.save-status').textContent === 'Renamed'")
    assert "dashboard=Perf+%26+timing" in page.url or "dashboard=Perf%20%26%20timing" in page.url
    assert stored(dashboard, run_id, None, "Perf & timing") == [["General", ["grad_norm"]]]

    page.select_option(".dashboard-picker", "default")  # switching keeps each one's plots
    page.wait_for_url(lambda url: "dashboard=" not in url)
    page.wait_for_selector(card("Entropy"))
    assert board(page) == [["Main", ["Entropy"]]]
    page.select_option(".dashboard-picker", "Perf & timing")
    page.wait_for_selector(card("Gradient norm"))
    page.once("dialog", lambda d: d.accept())
    page.click(".dashboards button:text('Delete')")
    page.wait_for_url(lambda url: "dashboard=" not in url)
    page.wait_for_selector(card("Entropy"))
    assert dashboard.get(f"/api/runs/{run_id}/layout")["names"] == ["default"]
