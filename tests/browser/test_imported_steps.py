"""An imported TRL run on its own step axis, as the Metrics page draws it: a real TRL GRPO run
logged through HF Trainer's trackio callback (tests/integrations/make_logs.py `trl`), imported
with `telescope import trackio`, opened in Chromium. trackio's own counter puts
`train/reward` at 1, 3, 5, 7 (TRL logs twice per step); the chart's x values must be the
run's `train/global_step`, 1, 2, 3, 4 (docs/integrations.md, importers). The picture of that
chart goes to artifacts/import-trl-steps.png (docs/img/import_trl_steps.png is one)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import orjson
import pytest

from devtools.live_server import ROOT, LiveServer
from ingest.core.series_ids import series_id
from tests.browser.conftest import ARTIFACTS, trace, wait_chart
from tests.integrations.make_logs import TRL_STEPS
from tests.integrations.test_importers import make_logs, needs

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]


def trackio_rows(db: Path, key: str) -> dict[int, tuple[int, float]]:
    """{train/global_step: (trackio's own step, value)} of the rows of `db` that logged `key`,
    read from trackio's database itself."""
    with sqlite3.connect(db) as conn:
        rows = [(step, orjson.loads(metrics)) for step, metrics in
                conn.execute("SELECT step, metrics FROM metrics ORDER BY id")]
    return {int(m["train/global_step"]): (step, float(m[key])) for step, m in rows if key in m}


@needs("trackio", "trl", "wandb", "tensorboard")
def test_an_imported_trl_runs_reward_is_drawn_on_its_global_step(
        browser: Any, dashboard_server: LiveServer, tmp_path: Path) -> None:
    make_logs("trl", tmp_path)
    db = tmp_path / "trackio" / "telescope-trl.db"
    logged = trackio_rows(db, "train/reward")
    assert sorted(logged) == list(range(1, TRL_STEPS + 1))
    assert [own for own, _ in logged.values()] != sorted(logged)  # trackio's: another axis
    done = subprocess.run([sys.executable, "-m", "telescope_ui.cli", "import", "trackio",
                           str(db), "--project", "trl"], env=dashboard_server.state.env,
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    with urllib.request.urlopen(dashboard_server.http + "/api/runs", timeout=30) as res:
        [run] = [r for r in orjson.loads(res.read())["runs"] if r["name"] == "trl-grpo"]

    # Twice the pixels (the picture is for the docs); a JavaScript error fails the test.
    context = browser.new_context(viewport={"width": 1000, "height": 700},
                                  device_scale_factor=2, bypass_csp=True)
    try:
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(f"{dashboard_server.http}/runs/{run['id']}/metrics")
        page.check("input[name=regex]")
        page.fill("input[name=search]", "^train/reward$")  # that chart alone, in view
        page.wait_for_function(
            "document.querySelector('.search-count').textContent === '1 chart'")
        sid = series_id("step", "train/reward")
        line = trace(wait_chart(page, sid), run["id"], "raw")
        assert line["x"] == sorted(logged)  # the logged global steps: 1, 2, 3, 4
        assert line["y"] == pytest.approx([logged[s][1] for s in sorted(logged)])

        # The section's heading ("train") and the chart ("reward"), cropped.
        chart = page.locator(".chart:not([hidden])", has=page.locator(f"[data-series-id='{sid}']"))
        heading = page.locator("section.section:not([hidden]) h2")
        top, box = heading.bounding_box(), chart.bounding_box()
        assert top is not None and box is not None
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "import-trl-steps.png"), clip={
            "x": box["x"] - 8, "y": top["y"] - 4, "width": box["width"] + 16,
            "height": box["y"] + box["height"] + 8 - (top["y"] - 4)})
        assert not errors, errors
    finally:
        context.close()
