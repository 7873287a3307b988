"""The Metrics page shows a run's re-aggregation backlog (after a range change) while the server
works through it, and drops the notice when it is done."""

from __future__ import annotations

import pytest

from ingest.core.series_ids import series_id
from ingest.pipeline.materialize import STEPS_PER_PASS
from tests.browser.conftest import wait_chart
from tests.browser.test_metrics_page import open_metrics
from trainer_hooks.wire.protocol import MAX_STEPS_PER_MESSAGE

pytestmark = pytest.mark.browser

STEPS = 3 * STEPS_PER_PASS + 5  # a backlog of several passes

# Every text the progress badge shows while visible, in order (the backlog may be worked off
# faster than a poll could see it).
RECORD_PROGRESS = """
window.__progress = [];
new MutationObserver(() => {
  const badge = document.querySelector('.run-chip .badge.progress');
  const text = badge && !badge.hidden ? badge.textContent : '';
  if (window.__progress.at(-1) !== text) window.__progress.push(text);
}).observe(document, { subtree: true, childList: true, characterData: true, attributes: true });
"""


def many_steps(run: str) -> list[dict]:
    """STEPS steps of 4 samples, in messages of at most MAX_STEPS_PER_MESSAGE steps."""
    out = []
    for lo in range(0, STEPS, MAX_STEPS_PER_MESSAGE):
        steps = [s for s in range(lo, min(lo + MAX_STEPS_PER_MESSAGE, STEPS)) for _ in range(4)]
        out.append({"v": 1, "id": f"{run}-many-{lo}", "type": "samples", "run": run,
                    "step": steps, "env": "countdown", "sample_id": list(range(len(steps))),
                    "group_id": steps, "reward": [float(i % 2) for i in range(len(steps))]})
    return out


def test_a_range_change_shows_the_backlog_until_it_is_worked_off(page, dashboard):
    dashboard.post(many_steps("agg"))
    page.add_init_script(RECORD_PROGRESS)
    open_metrics(page, dashboard, "agg")
    wait_chart(page, series_id("reward", "reward", "mean", None))
    assert page.is_hidden(".run-chip .badge.progress")
    trainer = dashboard.ingest_socket()
    try:
        trainer.send({"v": 1, "id": "ranges", "type": "ranges", "run": "agg",
                      "environments": [{"name": "countdown", "reward_min": 0.0,
                                        "reward_max": 1.0}]})
    finally:
        trainer.close()
    page.wait_for_function("window.__progress.some(t => t.includes('to aggregate'))",
                           timeout=20_000)
    page.wait_for_function("window.__progress.at(-1) === ''", timeout=30_000)
    shown = [t for t in page.evaluate("window.__progress") if t]
    assert shown, "the badge never showed"
    for text in shown:
        assert text.startswith("catching up · ") and text.endswith(" steps to aggregate"), text
        left = int(text.split("· ")[1].split(" ")[0].replace(",", ""))
        assert 0 < left < STEPS
    assert page.is_hidden(".run-chip .badge.progress")
    assert dashboard.get(f"/api/runs/{dashboard.run_id('agg')}")["pending_steps"] == 0
