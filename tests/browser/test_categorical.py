"""A categorical step key (string values) in Chromium: a state strip on the step axis with a
legend of each value and its count of steps, a tooltip naming the value, live updates and one
row per overlaid run."""

from __future__ import annotations

from typing import Any

import pytest

from ingest.core.series_ids import series_id
from tests.browser.conftest import ARTIFACTS, step, wait_chart
from tests.browser.test_metrics_page import open_metrics

pytestmark = pytest.mark.browser

KEY = "optim/update_outcome"
OUTCOME = series_id("step", KEY)
OUTCOMES = ["applied", "applied", "applied", "skipped", "skipped", "applied", "nan_grad", "applied"]


def post_run(dashboard, run: str, outcomes: list[str | None]) -> int:
    dashboard.post([step(run, n, {"loss": 1.0 / (n + 1), **({} if o is None else {KEY: o})})
                    for n, o in enumerate(outcomes)])
    return dashboard.run_id(run)


def legend(pg) -> list[dict[str, Any]]:
    return pg.eval_on_selector_all(
        f".chart:has([data-series-id='{OUTCOME}']) [data-state-legend] li",
        "lis => lis.map(li => ({run: Number(li.dataset.run), items: [...li.querySelectorAll("
        "'.state-item')].map(i => [i.dataset.value, Number(i.dataset.count)])}))")


def strips(pg) -> list[dict[str, Any]]:
    return pg.evaluate(
        """sid => document.querySelector(`[data-series-id="${sid}"]`).data
          .map(t => ({type: t.type, run: t.meta.run, x: Array.from(t.x), z: Array.from(t.z[0]),
                      values: t.meta.values}))""", OUTCOME)


def hover_text(pg, at_step: float, row: int = 0) -> tuple[str, str]:
    """Move the mouse over the strip at a step (and run row): Plotly's tooltip, (text, run)."""
    box = pg.evaluate(
        """([sid, x, row]) => { const gd = document.querySelector(`[data-series-id="${sid}"]`);
        const fl = gd._fullLayout, r = gd.getBoundingClientRect();
        return {x: r.left + fl._size.l + fl.xaxis.l2p(x),
                y: r.top + fl._size.t + fl.yaxis.l2p(row)}; }""",
        [OUTCOME, at_step, row])
    tip = f"[data-series-id='{OUTCOME}'] .hoverlayer .hovertext"
    before = pg.text_content(f"{tip} text.nums") if pg.query_selector(tip) else None
    pg.mouse.move(box["x"], box["y"])
    # Plotly redraws the label on its next hover event: wait for it to change (a loaded
    # machine may still show the previous one for a while).
    pg.wait_for_function("""([sel, before]) => { const t = document.querySelector(sel);
        return t && t.textContent !== before; }""", arg=[f"{tip} text.nums", before],
        timeout=10_000)
    return pg.text_content(f"{tip} text.nums") or "", pg.text_content(f"{tip} text.name") or ""


def test_a_string_key_is_drawn_as_a_state_strip_with_counts_and_tooltips(page, dashboard):
    run_id = post_run(dashboard, "cat", OUTCOMES)
    catalog = dashboard.get(f"/api/runs/{run_id}/catalog")["series"]
    assert next(e for e in catalog if e["id"] == OUTCOME).get("categorical") is True
    open_metrics(page, dashboard, "cat")
    page.check("input[name=ema]")  # EMA and Normalize do not apply to a strip
    page.check("input[name=normalize]")
    page.locator(f"[data-series-id='{OUTCOME}']").scroll_into_view_if_needed()
    wait_chart(page, OUTCOME)
    [strip] = strips(page)
    assert strip["type"] == "heatmap" and strip["run"] == run_id
    assert strip["values"] == ["applied", "skipped", "nan_grad"]
    # Bands: applied 0–2, skipped 3–4, applied 5, nan_grad 6, applied 7.
    assert strip["z"] == [0, 1, 0, 2, 0]
    assert strip["x"] == [-0.5, 2.5, 4.5, 5.5, 6.5, 7.5]
    assert legend(page) == [{"run": run_id, "items": [["applied", 5], ["skipped", 2],
                                                      ["nan_grad", 1]]}]
    assert page.query_selector(f".chart:has([data-series-id='{OUTCOME}']) "
                               "button[title='Chart settings']") is None
    assert hover_text(page, 4) == ("skipped · steps 3–4 (2)", "cat")
    assert hover_text(page, 6) == ("nan_grad · step 6 (1)", "cat")
    ARTIFACTS.mkdir(exist_ok=True)
    page.locator(".chart", has=page.locator(f"[data-series-id='{OUTCOME}']")).screenshot(
        path=str(ARTIFACTS / "state-strip.png"))

    # Live: a new step extends the last band and a new value joins the legend.
    page.mouse.move(0, 0)
    trainer = dashboard.ingest_socket()
    try:
        trainer.send(step("cat", 8, {"loss": 0.1, KEY: "applied"}))
        trainer.send(step("cat", 9, {"loss": 0.1, KEY: "clipped"}))
    finally:
        trainer.close()
    page.wait_for_function(
        f"""document.querySelector("[data-series-id='{OUTCOME}']").data[0].z[0].length === 6""")
    [strip] = strips(page)
    assert strip["z"] == [0, 1, 0, 2, 0, 3]
    assert strip["x"][-3:] == [6.5, 8.5, 9.5]
    assert legend(page)[0]["items"] == [["applied", 6], ["skipped", 2], ["nan_grad", 1],
                                        ["clipped", 1]]


def test_overlaid_runs_get_one_strip_row_each(page, dashboard):
    a = post_run(dashboard, "ca", OUTCOMES)
    b = post_run(dashboard, "cb", ["skipped", "skipped", None, "applied"])
    open_metrics(page, dashboard, "ca", f"?overlay={b}")
    page.locator(f"[data-series-id='{OUTCOME}']").scroll_into_view_if_needed()
    wait_chart(page, OUTCOME, "gd.data.length === 2")
    rows = {s["run"]: s for s in strips(page)}
    assert rows[b]["z"] == [1, 0]  # skipped, applied; colours shared with the first run's values
    assert rows[b]["x"] == [-0.5, 2.5, 3.5]  # no value at step 2: the state holds until step 3
    assert legend(page) == [
        {"run": a, "items": [["applied", 5], ["skipped", 2], ["nan_grad", 1]]},
        {"run": b, "items": [["applied", 1], ["skipped", 2]]}]
    assert hover_text(page, 0, row=1) == ("skipped · steps 0–1 (2)", "cb")
