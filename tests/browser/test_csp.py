"""The Content-Security-Policy holds and the pages keep to it (a context that does not bypass
it): every page renders its charts, tables and live updates with no violation, and an injected
inline script does not run."""

from __future__ import annotations

import urllib.request
from typing import Any

from ingest.core.series_ids import series_id
from tests.browser.conftest import Dashboard, step

SID = series_id("step", "loss")
CHART = f"[data-series-id='{SID}']"


def samples(run: str, step_: int) -> dict[str, Any]:
    return {"v": 1, "id": f"{run}-s{step_}", "type": "samples", "run": run, "step": step_,
            "sample_id": ["a", "b"], "group_id": [0, 0], "reward": [1.0, 0.0],
            "completion": ["yes", "no"]}


def test_every_response_carries_the_policy(dashboard: Dashboard) -> None:
    with urllib.request.urlopen(dashboard.url + "/", timeout=30) as res:
        policy = res.headers["Content-Security-Policy"]
    assert "script-src 'self'" in policy and "'unsafe-eval'" not in policy
    assert "frame-ancestors 'none'" in policy


def test_every_page_renders_under_the_policy(dashboard: Dashboard,
                                             strict_page: tuple[Any, list[str]]) -> None:
    page, problems = strict_page
    dashboard.post([step("csp", 0, {"loss": 1.0}), samples("csp", 0)])
    rid = dashboard.run_id("csp")
    for path, ready in [("/", "a:has-text('csp')"), (f"/runs/{rid}", "#progress"),
                        (f"/runs/{rid}/metrics", f"{CHART} .main-svg"),
                        (f"/runs/{rid}/metrics?view=custom", "body"),
                        (f"/runs/{rid}/samples?step=0", "#step-slider"),
                        (f"/runs/{rid}/timeline", "#timeline"),
                        (f"/runs/{rid}/performance", "#performance[data-drawn]")]:
        page.goto(dashboard.url + path)
        page.wait_for_selector(ready, state="attached", timeout=15_000)
        page.wait_for_load_state("networkidle")
        assert not problems, (path, problems)


def test_an_injected_inline_script_does_not_run_and_live_updates_still_do(
        dashboard: Dashboard, strict_page: tuple[Any, list[str]]) -> None:
    page, problems = strict_page
    dashboard.post([step("csp", 0, {"loss": 1.0})])
    rid = dashboard.run_id("csp")
    page.goto(f"{dashboard.url}/runs/{rid}/metrics")
    page.wait_for_selector(f"{CHART} .main-svg", timeout=15_000)
    page.evaluate("""() => { const s = document.createElement('script');
        s.textContent = 'window.__injected = true'; document.body.appendChild(s); }""")
    assert page.evaluate("() => window.__injected === undefined")
    assert any("Content Security Policy" in p for p in problems)  # refused, and reported
    problems.clear()
    dashboard.post([step("csp", 1, {"loss": 0.5})])
    page.wait_for_function("""sel => { const gd = document.querySelector(sel);
        return gd && gd.data && gd.data[0].y.length === 2; }""", arg=CHART, timeout=15_000)
    assert not problems, problems
