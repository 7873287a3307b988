"""Run colours in Chromium: every page draws the colour the server stored for a run
(distinct within its project), and a colour changed on the run list is saved and drawn."""

from __future__ import annotations

import time

import pytest

from ingest.core.series_ids import series_id
from tests.browser.conftest import step, trace, wait_chart

pytestmark = pytest.mark.browser

ENTROPY = series_id("step", "entropy")


def test_pages_draw_the_stored_colours_and_a_changed_one(page, dashboard):
    names = ["c1", "c2", "c3"]
    dashboard.post([step(n, i, {"entropy": float(k + i)}) for k, n in enumerate(names)
                    for i in range(3)])
    ids = [dashboard.run_id(n) for n in names]
    stored = {i: dashboard.get(f"/api/runs/{i}")["color"] for i in ids}
    assert len(set(stored.values())) == 3  # distinct within the project
    page.goto(f"{dashboard.url}/runs/{ids[0]}/metrics?overlay={ids[1]},{ids[2]}")
    fig = wait_chart(page, ENTROPY, "gd.data.filter(t => t.meta.role === 'raw').length === 3")
    for i in ids:
        chip = page.eval_on_selector(f"[data-run-id='{i}'] input[type=color]", "e => e.value")
        assert chip == stored[i].lower()
        assert trace(fig, i, "raw")["color"].lower() == stored[i].lower()

    # Changed on the run list: saved on the server, drawn by the Metrics page.
    page.goto(f"{dashboard.url}/")
    sel = f"tr[data-run-id='{ids[2]}'] input[type=color]"
    page.wait_for_selector(sel)
    assert page.eval_on_selector(sel, "e => e.value") == stored[ids[2]].lower()
    page.eval_on_selector(sel, "e => { e.value = '#a1b2c3'; e.dispatchEvent(new Event('input')); "
                               "e.dispatchEvent(new Event('change')); }")
    deadline = time.monotonic() + 5
    while dashboard.get(f"/api/runs/{ids[2]}")["color"].lower() != "#a1b2c3":
        assert time.monotonic() < deadline, "colour not saved"
        time.sleep(0.1)
    page.goto(f"{dashboard.url}/runs/{ids[2]}/metrics")
    fig = wait_chart(page, ENTROPY, "gd.data.some(t => t.line && t.line.color === '#a1b2c3')")
    assert trace(fig, ids[2], "raw")["color"] == "#a1b2c3"
