"""The sample viewer in Chromium: opened from a click on a reward chart's point, the
rewards and sample metrics coloured red → green by each environment's declared or observed range
(invert honoured), a sample opened to its escaped text, search with highlight, best vs worst of a
group side by side, keyboard navigation, and a running run's newest step arriving live."""

from __future__ import annotations

import re
from typing import Any

import pytest

from ingest.core.series_ids import series_id
from ingest.write.demo import demo_messages
from tests.browser.conftest import ARTIFACTS, wait_chart
from tests.browser.test_metrics_page import open_metrics

pytestmark = pytest.mark.browser

MEAN = series_id("reward", "reward", "mean", None)
ENVS = [{"name": "a", "reward_min": 0.0, "reward_max": 10.0,
         "metrics_ranges": {"steps": {"min": 0, "max": 20, "invert": True}}}]


def samples(run: str, step: int, rewards: list[float], *, env: str = "a", mid: str | None = None,
            groups: list[Any] | None = None, **extra: Any) -> dict[str, Any]:
    mid = mid or f"{run}-{env}-{step}"
    return {"v": 1, "id": mid, "type": "samples", "run": run, "step": step, "env": env,
            "sample_id": [f"{mid}-{i}" for i in range(len(rewards))],
            "group_id": groups or [f"{env}-g"] * len(rewards), "reward": rewards, **extra}


def start(run: str) -> dict[str, Any]:
    return {"v": 1, "id": f"{run}-start", "type": "run.start", "run": run, "environments": ENVS}


def open_samples(pg: Any, dashboard: Any, run: str, query: str = "") -> int:
    run_id = dashboard.run_id(run)
    pg.goto(f"{dashboard.url}/runs/{run_id}/samples{query}")
    pg.wait_for_selector("#samples[data-loaded]")
    return run_id


def chips(pg: Any, selector: str) -> list[dict[str, Any]]:
    """Each chip's sample, text, normalized position and background colour (r, g, b)."""
    return pg.eval_on_selector_all(selector, """els => els.map(el => ({
        sample: el.closest('.sample')?.dataset.sampleId, text: el.textContent,
        norm: el.dataset.norm ?? null, title: el.title,
        rgb: getComputedStyle(el).backgroundColor.match(/\\d+/g).slice(0, 3).map(Number)}))""")


def test_a_click_on_a_reward_chart_point_opens_that_step(page, dashboard):
    dashboard.post(list(demo_messages("demo", 6, seed=2)))
    run_id = open_metrics(page, dashboard, "demo")
    page.locator(f"[data-series-id='{MEAN}']").scroll_into_view_if_needed()
    wait_chart(page, MEAN)
    # charts/features.js registers the add-on (in the page's bundle): drawn charts have it.
    page.wait_for_function(
        "sid => document.querySelector(`[data-series-id='${sid}']`).classList.contains("
        "'links-samples')", arg=MEAN)
    x, y = page.evaluate("""sid => {
        const gd = document.querySelector(`[data-series-id='${sid}']`);
        const t = gd.data.find(t => t.meta && t.meta.role === 'raw');
        const i = t.x.indexOf(3), L = gd._fullLayout, box = gd.getBoundingClientRect();
        return [box.left + L._size.l + L.xaxis.l2p(3), box.top + L._size.t + L.yaxis.l2p(t.y[i])];
    }""", MEAN)
    page.mouse.move(x, y)
    page.mouse.click(x, y)
    page.wait_for_url(re.compile(rf"/runs/{run_id}/samples\?step=3$"))
    page.wait_for_selector("#samples[data-step='3']")
    assert page.locator(".sample").count() == 128  # 2 environments × 8 groups × 8
    assert page.locator("#step-input").input_value() == "3"


def test_colours_follow_the_declared_range_the_observed_one_and_invert(page, dashboard):
    dashboard.post([
        start("r"),
        samples("r", 0, [0.0, 5.0, 10.0], metrics={"steps": [0, 10, 20], "len": [1, 2, 3]}),
        samples("r", 0, [1.0, 3.0], env="b"),  # no declaration: observed 1 – 3
    ])
    open_samples(page, dashboard, "r")
    rewards = {c["sample"]: c for c in chips(page, ".sample-summary .chip.reward")}
    assert {s: c["norm"] for s, c in rewards.items()} == {
        "r-a-0-0": "0.000", "r-a-0-1": "0.500", "r-a-0-2": "1.000",
        "r-b-0-0": "0.000", "r-b-0-1": "1.000"}
    assert "declared range 0 – 10" in rewards["r-a-0-1"]["title"]
    assert "observed range 1 – 3" in rewards["r-b-0-0"]["title"]
    red, green = rewards["r-a-0-0"]["rgb"], rewards["r-a-0-2"]["rgb"]
    assert red[0] > red[1] and green[1] > green[0]  # red → green
    metrics = chips(page, ".sample-summary .chip.metric")
    steps = {c["sample"]: c["norm"] for c in metrics if c["text"].startswith("steps")}
    assert steps == {"r-a-0-0": "1.000", "r-a-0-1": "0.500", "r-a-0-2": "0.000"}  # inverted
    length = {c["sample"]: c["norm"] for c in metrics if c["text"].startswith("len")}
    assert length == {"r-a-0-0": "0.000", "r-a-0-1": "0.500", "r-a-0-2": "1.000"}
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "samples-colours.png"))


XSS = '<img src=x onerror="window.__xss = 1">'


def test_a_sample_opens_to_its_escaped_text_and_search_marks_matches(page, dashboard):
    completion = f"line one\n  indented {XSS}\nthe needle, and a Needle again"
    dashboard.post([start("t"), samples(
        "t", 0, [1.0, 0.0, 0.5], groups=["g", "g", "h"],
        prompt=["Find the needle.", "Find the needle.", "no match here"],
        completion=[completion, "nothing", None])])
    open_samples(page, dashboard, "t")
    row = page.locator(".sample[data-sample-id='t-a-0-0']")
    row.locator(".sample-summary").click()
    texts = row.locator(".sample-detail pre")
    texts.first.wait_for()
    assert texts.nth(0).text_content() == "Find the needle."
    assert texts.nth(1).text_content() == completion
    assert texts.nth(1).evaluate("el => getComputedStyle(el).fontFamily").find("mono") >= 0
    assert page.locator(".sample-detail img").count() == 0
    assert page.evaluate("window.__xss") is None

    page.locator("#text-search").fill("needle")
    page.wait_for_function("document.querySelector('#search-status').textContent.startsWith('4')")
    assert page.locator("#search-status").text_content().startswith("4 matches in 2 samples")
    assert row.locator("mark").all_text_contents() == ["needle", "needle", "Needle"]
    assert page.locator(".sample.match").count() == 2
    assert page.locator(".sample.no-match").count() == 1

    search = page.locator("#text-search")
    search.press("Enter")  # the first sample with a match, then the next one, opens
    page.wait_for_selector(".sample.current-match[data-sample-id='t-a-0-0']")
    search.press("Enter")
    page.wait_for_selector(".sample.current-match[data-sample-id='t-a-0-1']")
    assert page.evaluate("document.activeElement.id") == "text-search"
    other = page.locator(".sample[data-sample-id='t-a-0-1']")
    other.locator("mark").first.wait_for()
    assert other.locator("mark").all_text_contents() == ["needle"]
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "samples-search.png"))


def test_best_vs_worst_of_a_group_side_by_side(page, dashboard):
    dashboard.post([start("c"), samples(
        "c", 0, [0.2, 0.9, 0.5], prompt=["same prompt"] * 3,
        completion=["worst answer", "best answer", "middle answer"]),
        samples("c", 0, [0.3], env="b", completion=["alone"])])
    open_samples(page, dashboard, "c")
    group = page.locator(".sample-group[data-group-id='a-g']")
    group.get_by_role("button", name="Best vs worst").click()
    best, worst = group.locator("[data-side='best']"), group.locator("[data-side='worst']")
    best.locator("[data-text='completion'] pre").wait_for()
    assert best.locator("[data-text='completion'] pre").text_content() == "best answer"
    assert worst.locator("[data-text='completion'] pre").text_content() == "worst answer"
    assert best.locator(".chip.reward").text_content() == "0.9"
    b, w = best.bounding_box(), worst.bounding_box()
    assert abs(b["y"] - w["y"]) < 1 and w["x"] >= b["x"] + b["width"]  # side by side
    lone = page.locator(".sample-group[data-group-id='b-g']")
    assert lone.get_by_role("button", name="Best vs worst").is_disabled()
    ARTIFACTS.mkdir(exist_ok=True)
    group.screenshot(path=str(ARTIFACTS / "samples-best-vs-worst.png"))


def test_keys_move_between_samples_and_steps(page, dashboard):
    dashboard.post([start("k"), *(samples("k", s, [0.1, 0.2, 0.3], completion=[f"s{s}"] * 3)
                                  for s in (0, 1, 3))])
    open_samples(page, dashboard, "k", "?step=0")
    focused = "() => document.activeElement.closest('.sample')?.dataset.sampleId ?? null"
    page.keyboard.press("j")
    assert page.evaluate(focused) == "k-a-0-2"  # highest reward first
    page.keyboard.press("j")
    page.keyboard.press("ArrowDown")
    assert page.evaluate(focused) == "k-a-0-0"
    page.keyboard.press("k")
    assert page.evaluate(focused) == "k-a-0-1"
    page.keyboard.press("Enter")
    page.locator(".sample[data-sample-id='k-a-0-1'] .sample-detail pre").first.wait_for()
    page.keyboard.press("Escape")
    assert page.locator(".sample-detail:not([hidden])").count() == 0

    for key, expected in (("ArrowRight", "1"), ("ArrowRight", "3"), ("ArrowLeft", "1"),
                          ("Home", "0"), ("End", "3")):
        page.keyboard.press(key)
        page.wait_for_selector(f"#samples[data-step='{expected}']")
    assert "step=3" in page.url
    assert page.locator("#step-next").is_disabled()


def test_a_running_runs_newest_step_appears_without_reload(page, dashboard):
    dashboard.post([start("live"), samples("live", 0, [0.5, 1.0])])
    open_samples(page, dashboard, "live")  # no step: follows the newest
    page.evaluate("window.__same_page = true")
    assert page.locator("#follow").is_checked()
    trainer = dashboard.ingest_socket()
    try:
        trainer.send(samples("live", 1, [0.25, 0.75, 1.0], completion=["a", "b", "c"]))
        page.wait_for_selector("#samples[data-step='1']", timeout=15_000)
        assert page.locator(".sample").count() == 3
        assert page.locator("#step-slider").get_attribute("max") == "1"

        page.locator("#step-prev").click()  # reading an older step: stays there
        page.wait_for_selector("#samples[data-step='0']")
        assert not page.locator("#follow").is_checked()
        trainer.send(samples("live", 2, [0.0]))
        page.wait_for_function("document.querySelector('#step-slider').max === '2'",
                               timeout=15_000)
        assert page.locator("#samples").get_attribute("data-step") == "0"
        assert not page.locator("#step-next").is_disabled()
    finally:
        trainer.close()
    assert page.evaluate("window.__same_page") is True
