"""The Normalize toggle in Chromium: reward and sample-metric charts switch to the server's
normalized family (each sample mapped by its own environment's range), say where the range came
from, and every other chart stays as it is."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import pytest

from ingest.core.series_ids import series_id
from tests.browser.conftest import ARTIFACTS, step, trace, wait_chart
from tests.browser.test_metrics_page import open_metrics

pytestmark = pytest.mark.browser

ENVS = [{"name": "countdown", "reward_min": 0.0, "reward_max": 2.0},
        {"name": "math", "reward_min": 0.0, "reward_max": 1.0}]
# Step 0's pooled normalized mean: countdown 2,1,0,2 → 1,.5,0,1; math 1,0,1,1 as they are;
# (2.5 + 3) / 8 = 0.6875 (the raw mean, 1.0, stretched by the widest range would give 0.5).
REWARDS = {0: {"countdown": [2.0, 1.0, 0.0, 2.0], "math": [1.0, 0.0, 1.0, 1.0]},
           1: {"countdown": [1.0, 1.0, 2.0, 2.0], "math": [0.0, 0.0, 1.0, 0.0]},
           2: {"countdown": [0.0, 0.0, 1.0, 2.0], "math": [1.0, 1.0, 1.0, 0.0]}}
LOSS, ENTROPY = series_id("step", "loss"), series_id("step", "entropy")
MEAN = series_id("reward", "reward", "mean", None)
MEAN_COUNTDOWN = series_id("reward", "reward", "mean", "countdown")


def samples(run: str, n: int, env: str, rewards: list[float]) -> dict[str, Any]:
    k = len(rewards)
    return {"v": 1, "id": f"{run}-{env}-{n}", "type": "samples", "run": run, "step": n,
            "env": env, "sample_id": [f"{env}-{n}-{i}" for i in range(k)],
            "group_id": [f"{env}-{n}-g{i // 2}" for i in range(k)], "reward": rewards}


def post_run(dashboard, run: str, rewards: dict[int, dict[str, list[float]]]) -> int:
    dashboard.post([{"v": 1, "id": f"{run}-start", "type": "run.start", "run": run,
                     "environments": ENVS}]
                   + [step(run, n, {"loss": 3.0 - n, "entropy": 0.5 + 0.1 * n}) for n in range(4)]
                   + [samples(run, n, env, rs) for n, by_env in rewards.items()
                      for env, rs in by_env.items()])
    return dashboard.run_id(run)


def twin_of(dashboard, run_id: int, raw: str) -> str:
    """The normalized twin of a raw series, found in the run's catalog by its fields."""
    cat = dashboard.get(f"/api/runs/{run_id}/catalog")["series"]
    entry = next(e for e in cat if e["id"] == raw)
    return next(e["id"] for e in cat if e.get("normalized") and all(
        e[f] == entry[f] for f in ("kind", "key", "stat", "env")))


def values(dashboard, run_id: int, sid: str) -> list[float]:
    body = dashboard.get(f"/api/runs/{run_id}/series?ids={quote(sid, safe='')}")
    return body["series"][sid]["value"]


def raw_y(fig: Any, run_id: int) -> list[float]:
    return trace(fig, run_id, "raw")["y"]


def env_y(fig: Any, run_id: int, env: str) -> list[float]:
    """The line of one environment in a composed chart."""
    return next(t["y"] for t in fig["data"] if t["meta"]["run"] == run_id
                and t["meta"]["role"] in ("raw", "env") and t["meta"].get("env") == env)


def badge(pg, sid: str) -> dict[str, Any]:
    return pg.eval_on_selector(
        f".chart:has([data-series-id='{sid}']) [data-range-badge]",
        "b => ({text: b.textContent, visible: !b.hidden && b.offsetWidth > 0,"
        " degenerate: b.classList.contains('degenerate')})")


def show(pg, sid: str) -> None:
    pg.locator(f"[data-series-id='{sid}']").scroll_into_view_if_needed()


def test_normalize_switches_reward_charts_to_the_normalized_family_only(page, dashboard):
    run_id = post_run(dashboard, "nz", REWARDS)
    twin = twin_of(dashboard, run_id, MEAN)
    expected = values(dashboard, run_id, twin)
    assert expected[0] == pytest.approx(0.6875)  # the pooled mean of every sample's v′
    open_metrics(page, dashboard, "nz")
    loss_raw = raw_y(wait_chart(page, LOSS), run_id)
    entropy_raw = raw_y(wait_chart(page, ENTROPY), run_id)
    show(page, MEAN)
    fig = wait_chart(page, MEAN)
    assert raw_y(fig, run_id) == pytest.approx([1.0, 0.875, 0.75])  # raw rewards, 0..2 scale
    assert sorted(set(fig["layout"]["shapes"])) == [0.0, 2.0]  # declared bounds (widest)
    assert not badge(page, MEAN)["visible"]

    page.check("input[name=normalize]")
    fig = wait_chart(page, MEAN, f"gd.dataset.plottedId === {twin!r}")
    assert raw_y(fig, run_id) == pytest.approx(expected)
    assert fig["layout"]["shapes"] == []
    lo, hi = fig["layout"]["yaxis"]["range"]
    assert lo <= 0.0 and hi >= 1.0
    assert badge(page, MEAN) == {"text": "per env: countdown declared 0\u20132 \u00b7 math declared"
                                         " 0\u20131", "visible": True, "degenerate": False}
    ARTIFACTS.mkdir(exist_ok=True)
    page.locator(".chart", has=page.locator(f"[data-series-id='{MEAN}']")).screenshot(
        path=str(ARTIFACTS / "normalized-chart.png"))
    # Each environment is a line of the same chart, switched to its own normalized series;
    # filtered to one environment, the badge says that environment's range.
    assert env_y(fig, run_id, "countdown") == pytest.approx([0.625, 0.75, 0.375])
    card = page.locator(".chart", has=page.locator(f"[data-series-id='{MEAN}']"))
    env_filter = card.get_by_label("Environments of reward")
    env_filter.select_option("countdown")
    countdown = twin_of(dashboard, run_id, MEAN_COUNTDOWN)
    fig = wait_chart(page, MEAN, "gd.data.every(t => t.meta.env === 'countdown')"
                                 f" && gd.dataset.plottedId === {countdown!r}")
    assert env_y(fig, run_id, "countdown") == pytest.approx([0.625, 0.75, 0.375])
    assert badge(page, MEAN)["text"] == "declared 0\u20132"
    env_filter.select_option("*")
    wait_chart(page, MEAN, "gd.data.some(t => t.meta.role === 'raw')")

    # Step metrics are not ranged: the same values, no badge.
    show(page, LOSS)
    assert raw_y(wait_chart(page, LOSS), run_id) == loss_raw
    assert raw_y(wait_chart(page, ENTROPY), run_id) == entropy_raw
    assert not badge(page, LOSS)["visible"]

    # Live: the twin's points arrive under its own id and redraw the normalized chart.
    dashboard.post([samples("nz", 3, "countdown", [2.0, 2.0]),
                    samples("nz", 3, "math", [0.0, 0.0])])
    show(page, MEAN)
    fig = wait_chart(page, MEAN, "gd.data.find(t => t.meta.role === 'raw').x.includes(3)")
    assert raw_y(fig, run_id)[-1] == pytest.approx(0.5)

    page.uncheck("input[name=normalize]")
    fig = wait_chart(page, MEAN, "gd.dataset.plottedId === gd.dataset.seriesId")
    assert raw_y(fig, run_id) == pytest.approx([1.0, 0.875, 0.75, 1.0])
    assert not badge(page, MEAN)["visible"]


def test_overlaid_runs_each_use_their_own_normalized_series(page, dashboard):
    a = post_run(dashboard, "na", REWARDS)
    b = post_run(dashboard, "nb", {0: {"math": [0.0, 1.0]}, 1: {"math": [1.0, 1.0]}})
    open_metrics(page, dashboard, "na", f"?overlay={b}")
    page.check("input[name=normalize]")
    show(page, MEAN)
    fig = wait_chart(page, MEAN, "gd.data.filter(t => t.meta.role === 'raw').length === 2"
                                 f" && gd.dataset.plottedId !== {MEAN!r}")
    assert raw_y(fig, a) == pytest.approx(values(dashboard, a, twin_of(dashboard, a, MEAN)))
    assert raw_y(fig, b) == pytest.approx([0.5, 1.0])
    # The runs' ranges differ (b has only math): the badge names each run's.
    assert badge(page, MEAN)["text"] == ("na: per env: countdown declared 0\u20132 \u00b7 math"
                                         " declared 0\u20131 | nb: declared 0\u20131")


def test_the_custom_view_follows_the_toggle_chart_by_chart(page, dashboard):
    run_id = post_run(dashboard, "nc", REWARDS)
    twin = twin_of(dashboard, run_id, MEAN)
    open_metrics(page, dashboard, "nc", "?view=custom")
    page.wait_for_selector(f".palette-item[data-metric-id='{MEAN}']")
    # Normalized series are reached through the toggle, not listed as metrics of their own.
    assert page.query_selector(f".palette-item[data-metric-id='{twin}']") is None
    for sid in (MEAN, LOSS):
        page.click(f".palette-item[data-metric-id='{sid}'] button.add")
    loss_raw = raw_y(wait_chart(page, LOSS), run_id)
    wait_chart(page, MEAN)
    page.check("input[name=normalize]")
    fig = wait_chart(page, MEAN, f"gd.dataset.plottedId === {twin!r}")
    assert raw_y(fig, run_id) == pytest.approx(values(dashboard, run_id, twin))
    assert badge(page, MEAN)["visible"]
    assert raw_y(wait_chart(page, LOSS), run_id) == loss_raw
    assert not badge(page, LOSS)["visible"]
