"""The Metrics page's view in its URL (static/js/charts/viewurl.js), in Chromium against a live
server: controls set in one browser context come back from the URL in a fresh one (empty
localStorage), a URL's view wins over the stored one, Copy link, the `/` shortcut, and the
smoothing choice drawn."""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

from ingest.core.series_ids import series_id
from tests.browser.conftest import step, wait_chart
from tests.browser.test_normalize import ENVS, REWARDS, samples

pytestmark = pytest.mark.browser

LOSS = series_id("step", "loss/total")
MEAN = series_id("reward", "reward", "mean", None)
# One outlier (100 at step 5: beyond Q3 + 6·IQR); steps 9.. are past the Max step set below.
T0 = 1_700_000_000.0
LOSS_VALUES = [3.0, 2.8, 2.9, 2.7, 2.6, 100.0, 2.5, 2.4, 2.3, 2.2, 2.1, 2.0]


def post_runs(dashboard) -> tuple[int, int]:
    """Run `va` (a loss a minute apart, rewards of two environments) and `vb` to overlay."""
    dashboard.post([{"v": 1, "id": "va-start", "type": "run.start", "run": "va",
                     "environments": ENVS}]
                   + [step("va", n, {"loss/total": v}, time=T0 + 60.0 * n)
                      for n, v in enumerate(LOSS_VALUES)]
                   + [samples("va", n, env, rs) for n, by_env in REWARDS.items()
                      for env, rs in by_env.items()]
                   + [step("vb", n, {"loss/total": 1.0 + n}, time=T0 + 60.0 * n)
                      for n in range(3)])
    return dashboard.run_id("va"), dashboard.run_id("vb")


@contextmanager
def fresh_page(browser, **options: Any) -> Iterator[Any]:
    """A page in a new browser context: empty localStorage, no history; JS errors fail."""
    context = browser.new_context(viewport={"width": 1400, "height": 900}, bypass_csp=True,
                                  **options)
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    yield pg
    context.close()
    assert not errors, f"JavaScript errors: {errors}"


def card(pg, sid: str):
    return pg.locator(".chart", has=pg.locator(f"[data-series-id='{sid}']"))


def open_settings(pg, sid: str) -> Any:
    """The chart's settings form, opened (by the chart's own toggle, wherever its button is)."""
    pg.locator(f"[data-series-id='{sid}']").scroll_into_view_if_needed()
    pg.evaluate("sid => window.telescope.view.chartFor(sid).toggleSettings()", sid)
    return card(pg, sid).locator("form.chart-settings")


def chart_settings(pg, sid: str) -> dict[str, Any]:
    return pg.evaluate("sid => ({...window.telescope.view.chartFor(sid).settings})", sid)


def commit(pg, selector: str, value: str) -> None:
    pg.fill(selector, value)
    pg.locator(selector).dispatch_event("change")


def gaussian(values: list[float], span: int, accept: list[bool]) -> list[float | None]:
    """docs/statistics.md "Smoothing": centred, reach ⌊span/2⌋, σ half of that."""
    half = span // 2
    sigma = half / 2
    out: list[float | None] = []
    for i in range(len(values)):
        num = den = 0.0
        for j in range(max(0, i - half), min(len(values), i + half + 1)):
            if accept[j]:
                w = math.exp(-((j - i) ** 2) / (2 * sigma * sigma))
                num += w * values[j]
                den += w
        out.append(num / den if den else None)
    return out


def controls(pg) -> dict[str, Any]:
    return pg.evaluate("""() => { const f = document.querySelector('form.controls').elements;
        return {x: f.xaxis.value, smooth: f.ema.checked, kind: f.smooth.value, span: f.span.value,
                normalize: f.normalize.checked, maxStep: f.maxStep.value, maxTime: f.maxTime.value,
                search: f.search.value, regex: f.regex.checked}; }""")


SET = {"x": "time", "smooth": True, "kind": "gauss", "span": "4", "normalize": True,
       "maxStep": "8", "maxTime": "2h", "search": "total|reward", "regex": True}
DEFAULTS = {"x": "step", "smooth": False, "kind": "ema", "span": "10", "normalize": False,
            "maxStep": "", "maxTime": "", "search": "", "regex": False}


def set_controls(pg) -> None:
    pg.check("input[value=time]")
    pg.check("input[name=ema]")
    pg.select_option("select[name=smooth]", "gauss")
    commit(pg, "input[name=span]", "4")
    pg.check("input[name=normalize]")
    commit(pg, "input[name=maxStep]", "8")
    commit(pg, "input[name=maxTime]", "2h")
    pg.check("input[name=regex]")
    pg.fill("input[name=search]", "total|reward")
    pg.wait_for_function("document.querySelector('.search-count').textContent.endsWith('charts')"
                         " && new URLSearchParams(location.search).get('q') === 'total|reward'")


def test_a_copied_url_opens_the_same_view_in_a_fresh_browser(page, browser, dashboard):
    a, b = post_runs(dashboard)
    page.goto(f"{dashboard.url}/runs/{a}/metrics?overlay={b}")
    wait_chart(page, LOSS)
    entries = page.evaluate("history.length")
    set_controls(page)
    # per-chart settings: the loss chart's outliers and y max, the reward chart's env filter
    form = open_settings(page, LOSS)
    form.locator("input[name=ignoreOutliers]").check()
    commit(page, f".chart:has([data-series-id='{LOSS}']) input[name=yMax]", "50")
    page.locator(f"[data-series-id='{MEAN}']").scroll_into_view_if_needed()
    wait_chart(page, MEAN)
    card(page, MEAN).locator("select[name=env]").select_option("math")
    page.wait_for_function("""() => {
        const c = new URLSearchParams(location.search).getAll('chart');
        return c.length === 2 && c.some(v => v.includes('env:math')); }""")
    assert page.evaluate("history.length") == entries  # replaced, never pushed
    url = page.url
    query = parse_qs(urlparse(url).query)
    assert query["smooth"] == ["gauss"] and query["x"] == ["time"] and query["overlay"] == [str(b)]
    # the other view's tab carries the same view
    custom = page.get_attribute("a[data-view=custom]", "href")
    assert "smooth=gauss" in custom and "view=custom" in custom

    with fresh_page(browser) as fresh:
        fresh.goto(url)
        fresh.wait_for_function("window.telescope && window.telescope.runs.length === 2")
        assert controls(fresh) == SET
        fresh.locator(f"[data-series-id='{LOSS}']").scroll_into_view_if_needed()
        fig = wait_chart(fresh, LOSS, "gd.data.some(t => t.meta.role === 'ema')")
        got = chart_settings(fresh, LOSS)
        assert got["ignoreOutliers"] is True and got["yMax"] == 50
        settings = open_settings(fresh, LOSS)
        assert settings.locator("input[name=ignoreOutliers]").is_checked()
        assert settings.locator("input[name=yMax]").input_value() == "50"
        # drawn as the URL says: steps 0..8 (Max step), a Gaussian of span 4 that skips the
        # outlier, on the time axis
        smooth = next(t for t in fig["data"] if t["meta"]["role"] == "ema"
                      and t["meta"]["run"] == a)
        kept = LOSS_VALUES[:9]
        assert smooth["x"] == [float(n) for n in range(9)]  # minutes since the first step
        assert smooth["y"] == pytest.approx(gaussian(kept, 4, [v != 100.0 for v in kept]))
        assert smooth["name"].endswith("Gaussian")
        fresh.locator(f"[data-series-id='{MEAN}']").scroll_into_view_if_needed()
        wait_chart(fresh, MEAN)
        assert card(fresh, MEAN).locator("select[name=env]").input_value() == "math"
        assert chart_settings(fresh, MEAN)["env"] == "math"


def test_a_urls_view_wins_over_the_stored_one_which_is_the_fallback(page, dashboard):
    a, _ = post_runs(dashboard)
    page.goto(f"{dashboard.url}/runs/{a}/metrics")
    wait_chart(page, LOSS)
    set_controls(page)
    # no view in the URL: the stored one, and the URL says it at once
    page.goto(f"{dashboard.url}/runs/{a}/metrics")
    page.wait_for_function("new URLSearchParams(location.search).get('smooth') === 'gauss'")
    assert controls(page) == SET
    # a URL's view, even one of defaults, wins over the stored one
    page.goto(f"{dashboard.url}/runs/{a}/metrics?x=step")
    wait_chart(page, LOSS)
    assert controls(page) == DEFAULTS
    # hand-edited values take their defaults, and the page works
    page.goto(f"{dashboard.url}/runs/{a}/metrics?x=up&smooth=cubic&span=abc&maxstep=-1"
              f"&maxtime=soon&chart={LOSS}!log:maybe,hi:x&chart=junk")
    wait_chart(page, LOSS)
    assert controls(page) == DEFAULTS
    assert chart_settings(page, LOSS)["logY"] is False


def test_copy_link_puts_the_view_url_in_the_clipboard(browser, dashboard):
    a, _ = post_runs(dashboard)
    with fresh_page(browser, permissions=["clipboard-read", "clipboard-write"]) as pg:
        pg.goto(f"{dashboard.url}/runs/{a}/metrics")
        wait_chart(pg, LOSS)
        pg.check("input[name=ema]")
        pg.select_option("select[name=smooth]", "mean")
        pg.get_by_role("button", name="Copy link").click()
        pg.wait_for_selector(".toast:not([hidden])")
        assert pg.text_content(".toast") == "Link copied"
        copied = pg.evaluate("navigator.clipboard.readText()")
        parsed = urlparse(copied)
        page_url = f"{dashboard.url}/runs/{a}/metrics"
        assert f"{parsed.scheme}://{parsed.netloc}{parsed.path}" == page_url
        # the whole view, the x axis too (so that stored settings elsewhere cannot override it)
        assert parse_qs(parsed.query) == {"x": ["step"], "smooth": ["mean"]}


def test_slash_focuses_the_metric_search_and_escape_leaves_it(page, dashboard):
    a, _ = post_runs(dashboard)
    page.goto(f"{dashboard.url}/runs/{a}/metrics")
    wait_chart(page, LOSS)
    active = "() => document.activeElement && document.activeElement.name"
    page.keyboard.press("/")
    assert page.evaluate(active) == "search"
    page.keyboard.type("loss/")  # in the search, `/` is a character
    assert page.input_value("input[name=search]") == "loss/"
    page.keyboard.press("Escape")
    assert page.evaluate(active) != "search"
    assert page.input_value("input[name=search]") == "loss/"  # left, not cleared
    # typing in another field: `/` is typed there
    page.focus("input[name=maxTime]")
    page.keyboard.press("/")
    assert page.evaluate(active) == "maxTime"
    assert page.input_value("input[name=maxTime]") == "/"
    # from a checkbox it jumps to the search, its text selected
    page.focus("input[name=normalize]")
    page.keyboard.press("/")
    assert page.evaluate(active) == "search"
    assert page.evaluate("(() => { const s = document.activeElement;"
                         " return [s.selectionStart, s.selectionEnd]; })()") == [0, 5]
