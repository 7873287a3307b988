"""Every chart of the demo run read in words (issue 31, items 1–3), in Chromium against a live
server fed the demo through real ingest: titles from the registry (no raw statistic id), a "?"
on each derived family, units on the y axes, whole-number ticks on counts, one number format on
axis and tooltip, titles whole at 1600×1000 and 1280×800 in the All and the Custom view, and
each environment of a run in its own colour, on a legend of two lines at most whose every
environment is named whole; a flat counter ticks whole numbers around its value."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from typing import Any

import pytest

from devtools.live_server import ServerState, running
from ingest.core.series_ids import series_id
from tests.browser.conftest import ARTIFACTS, Dashboard, wait_chart
from tests.browser.test_custom_view import plot, put_layout, section

pytestmark = pytest.mark.browser

VIEWPORTS = [(1600, 1000), (1280, 800)]
REWARD = series_id("reward", "reward", "mean", None)
GROUPS = series_id("groups", "groups", "count", None)
DISCARDED = series_id("discarded", "discarded", "count", None)
SKIPPED = series_id("step", "optim/step_skipped")
LR = series_id("step", "learning_rate")
NULLS = series_id("reward", "reward", "null_count", None)
MICROBATCHES = series_id("timeline", "timing_microbatch_count")
# Statistic ids that must never be a title's words (beside any `_`, checked apart).
BARE_IDS = re.compile(r"\b(count|canceled|informative|tied|all_min|all_max)$")


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Dashboard, int, int]]:
    """One server for the module, fed the demo run and a shorter baseline to overlay:
    (dashboard, demo run id, baseline run id)."""
    from ingest.write.demo import demo_messages

    state = ServerState(tmp_path_factory.mktemp("words"), os.environ.get("DATABASE_URL"),
                        os.environ.get("REDIS_URL"))
    try:
        with running(state) as server:
            dash = Dashboard(server, state.token("demo"))
            for name, steps, seed in (("grpo-demo", 60, 0), ("grpo-baseline", 30, 3)):
                messages = list(demo_messages(name, steps, seed=seed))
                for i in range(0, len(messages), 100):
                    dash.post(messages[i:i + 100])
            yield dash, dash.run_id("grpo-demo"), dash.run_id("grpo-baseline")
    finally:
        state.drop()


def raw_catalog(dash: Dashboard, run_id: int) -> list[dict[str, Any]]:
    return [e for e in dash.get(f"/api/runs/{run_id}/catalog")["series"] if not e.get("normalized")]


def open_all(pg, dash: Dashboard, run_id: int, size: tuple[int, int], query: str = "") -> None:
    """The run's All view at `size`, once every series of the catalog has its chart."""
    pg.set_viewport_size({"width": size[0], "height": size[1]})
    pg.goto(f"{dash.url}/runs/{run_id}/metrics{query}")
    n = len(raw_catalog(dash, run_id))
    pg.wait_for_function(f"window.telescope && window.telescope.view.bySeries.size === {n}",
                         timeout=20_000)


def titles(pg) -> list[dict[str, Any]]:
    """Every chart card's title (also of collapsed sections) with its "?" and how it is laid
    out: widths, line count, whether CSS could cut it, and where the next header item starts."""
    return pg.evaluate("""() => [...document.querySelectorAll('.chart')].map(card => {
        const t = card.querySelector('.chart-title');
        const help = card.querySelector('.chart-head [data-help]');
        const next = [...card.querySelectorAll('.chart-head > *')].find(el => el !== t
          && getComputedStyle(el).position !== 'absolute' && el.getBoundingClientRect().width > 0
          && el.getBoundingClientRect().left >= t.getBoundingClientRect().left);
        const style = getComputedStyle(t);
        return {text: t.textContent, shown: t.getClientRects().length > 0,
          scroll: t.scrollWidth, client: t.clientWidth,
          lines: Math.round(t.getBoundingClientRect().height / parseFloat(style.lineHeight)),
          ellipsis: style.textOverflow === 'ellipsis' && style.whiteSpace === 'nowrap',
          right: t.getBoundingClientRect().right,
          nextLeft: next ? next.getBoundingClientRect().left : Infinity,
          help: help ? help.getAttribute('title') : null,
          kind: card.querySelector('.plot')?.dataset.seriesId?.split('|')[0] ?? null}; })""")


def test_no_raw_statistic_id_in_any_title_of_the_demo_all_view(page, demo):
    dash, run_id, _ = demo
    open_all(page, dash, run_id, VIEWPORTS[0])
    catalog = raw_catalog(dash, run_id)
    # A user-named sample metric keeps its own name; environments and the trainer's timing
    # spans (`timing_<span>/<op>_total`: "Forward pass (in train_step)") are the user's names too.
    spans = {m.group(1) for e in catalog if (m := re.match(r"timing_(\w+)/", e["key"]))}
    user = sorted({e["key"] for e in catalog if e["kind"] == "sample"} | spans
                  | {e["env"] for e in catalog if e["env"]}, key=len, reverse=True)
    got = titles(page)
    assert len(got) >= 57
    for t in got:
        words = t["text"]
        for name in user:
            words = words.replace(name, "")
        assert "_" not in words, t["text"]  # gini_mean, max_async_pct, stop_reason_length_pct...
        assert not BARE_IDS.search(words), t["text"]  # `reward count`, `discarded canceled`
        if t["kind"] not in ("step", None):  # every derived family says what it means
            assert t["help"] and len(t["help"].split("\n")[0]) > 20, t
    by_title = {t["text"]: t for t in got}
    assert "reasoning_steps · inequality within groups (Gini)" in by_title
    assert "Stopped at length limit" in by_title


def y_axis(pg, sid: str) -> dict[str, Any]:
    """The rendered y axis of the chart of `sid`: its tick labels and its title."""
    return pg.evaluate("""sid => {
        const gd = document.querySelector(`[data-series-id="${CSS.escape(sid)}"]`);
        return {ticks: [...gd.querySelectorAll('.ytick text')].map(t => t.textContent),
                title: gd.querySelector('.g-ytitle text')?.textContent ?? null}; }""", sid)


def scroll_to(pg, sid: str) -> Any:
    pg.locator(f"[data-series-id='{sid}']").scroll_into_view_if_needed()
    return wait_chart(pg, sid, "gd.querySelectorAll('.ytick text').length > 0", timeout=15_000)


def test_count_charts_tick_in_whole_numbers_and_name_their_unit(page, demo):
    dash, run_id, _ = demo
    open_all(page, dash, run_id, VIEWPORTS[0])
    page.locator("[data-section='fixed:Data quality'] .section-toggle").click()
    counts = ((GROUPS, "groups"), (DISCARDED, "samples"), (NULLS, "samples"), (SKIPPED, None))
    for sid, unit in counts:
        scroll_to(page, sid)
        axis = y_axis(page, sid)
        assert axis["ticks"], sid
        for tick in axis["ticks"]:  # "1,024", "−2": whole numbers; never "0.5", "100p"
            assert re.fullmatch(r"[−-]?\d{1,3}(,\d{3})*", tick), (sid, axis["ticks"])
        assert len(set(axis["ticks"])) == len(axis["ticks"]), axis  # no tick written twice
        if unit:
            assert axis["title"] == unit, (sid, axis)
    for sid, unit in ((series_id("rollouts", "completion_tokens", "mean", None), "tokens"),
                      (series_id("rollouts", "stop_reason_length_pct", "stop_reason_length_pct",
                                 None), "%"),
                      (series_id("step", "entropy"), "nats")):
        scroll_to(page, sid)
        assert y_axis(page, sid)["title"] == unit, sid


def test_a_flat_counter_ticks_whole_numbers_around_its_value(page, demo):
    """The demo's Microbatches is 4 at every step: its axis showed one tick, "4"; now the
    whole numbers on each side too."""
    dash, run_id, _ = demo
    open_all(page, dash, run_id, VIEWPORTS[0])
    fig = scroll_to(page, MICROBATCHES)
    ys = {v for t in fig["data"] if t["meta"] and t["meta"]["role"] == "raw" for v in t["y"]
          if v is not None}
    assert ys == {4}, ys  # the demo's: flat
    axis = y_axis(page, MICROBATCHES)
    assert axis["ticks"] == ["3", "4", "5"], axis
    assert axis["title"] == "microbatches", axis


def test_a_share_axis_stays_within_0_and_100_percent(page, demo):
    """The demo's discards are all too stale (100 %), none for zero advantage (0 %): the axis
    of a share is not padded past 100 % nor below 0 %."""
    dash, run_id, _ = demo
    open_all(page, dash, run_id, VIEWPORTS[0])
    for key in ("max_async_pct", "zero_advantage_pct"):
        sid = series_id("discarded", "discarded", key, None)
        scroll_to(page, sid)
        got = page.evaluate("""sid => {
            const gd = document.querySelector(`[data-series-id="${CSS.escape(sid)}"]`);
            const ys = gd.data.filter(t => t.meta && t.meta.role === 'raw').flatMap(t => t.y)
              .filter(v => v !== null && Number.isFinite(v));
            return {range: gd.layout.yaxis.range, lo: Math.min(...ys), hi: Math.max(...ys)};
            }""", sid)
        assert 0 <= got["lo"] <= got["hi"] <= 100, (key, got)
        if got["hi"] == 0:  # a flat 0 keeps the flat counter's tiny range: its one tick, "0"
            assert got["range"][1] - got["range"][0] < 1e-6, (key, got)
            continue
        assert got["range"][0] >= 0 and got["range"][1] <= 100, (key, got)
        assert got["range"][0] <= got["lo"] and got["range"][1] >= got["hi"], (key, got)


def test_axis_and_tooltip_write_a_number_alike(page, demo):
    dash, run_id, _ = demo
    open_all(page, dash, run_id, VIEWPORTS[0])
    scroll_to(page, LR)  # the demo's learning rate: 1e-6 after its warm-up
    ticks = y_axis(page, LR)["ticks"]
    micro = next(t for t in ticks if t in ("1µ", "1μ"))  # the micro sign, or Plotly's Greek mu
    plot = page.locator(f"[data-series-id='{LR}'] .nsewdrag").first
    box = plot.bounding_box()
    plot.hover(position={"x": box["width"] * 0.8, "y": box["height"] / 2})
    label = page.wait_for_selector(f"[data-series-id='{LR}'] .hoverlayer .legend")
    text = label.text_content()
    assert micro in text and "0.000001" not in text, (ticks, text)


def test_titles_stay_whole_in_the_all_view_at_both_viewports(page, demo):
    dash, run_id, _ = demo
    for size in VIEWPORTS:
        open_all(page, dash, run_id, size)
        page.locator("[data-section='fixed:Data quality'] .section-toggle").click()
        page.evaluate("document.body.scrollIntoView()")
        shown = [t for t in titles(page) if t["shown"]]
        assert len(shown) >= 57, size
        for t in shown:
            assert t["client"] > 0 and t["scroll"] <= t["client"], (size, t)
            assert not t["ellipsis"], (size, t)
            assert t["right"] <= t["nextLeft"] + 0.5, (size, t)  # nothing drawn over its end
            assert t["lines"] <= 2, (size, t)
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"chart-words-all-{size[0]}x{size[1]}.png"))


# Plots titled by their series (the metric registry's words, else the key), as a user adds them.
LONG = [("rollouts|group_length_max_median_ratio_mean|group_length_max_median_ratio_mean|",),
        ("step|kl_divergence_inference||",), ("rollouts|completion_tokens|mean|",),
        ("timeline|timing_train_step%2Fforward_microbatch_mean||",),
        ("sample|reasoning_steps|gini_mean|",), ("step|kl_divergence_inference||",
                                                 "rollouts|completion_tokens|mean|")]


def test_titles_stay_whole_in_the_custom_view_at_both_viewports(page, demo):
    dash, run_id, _ = demo
    layout = {"version": 2, "sections": [section("s1", "Long titles", *[
        {**plot(f"p{i}"), "series": [{"id": sid, "axis": "auto"} for sid in ids]}
        for i, ids in enumerate(LONG)])]}
    page.goto(f"{dash.url}/runs/{run_id}/metrics?view=custom")
    put_layout(page, run_id, layout, name="words")
    for size in VIEWPORTS:
        page.set_viewport_size({"width": size[0], "height": size[1]})
        page.goto(f"{dash.url}/runs/{run_id}/metrics?view=custom&dashboard=words")
        page.wait_for_function("document.querySelectorAll('.board .chart.rendered').length >= 2")
        got = [t for t in titles(page) if t["shown"]]
        assert len(got) == len(LONG), got
        for t in got:
            assert t["client"] > 0 and t["scroll"] <= t["client"], (size, t)
            assert not t["ellipsis"], (size, t)
            assert t["right"] <= t["nextLeft"] + 0.5, (size, t)
        # The tools fold away: at most the "?" and the fold are beside a title at rest.
        beside = page.evaluate("""() => [...document.querySelectorAll('.board .chart-head')]
            .map(h => [...h.querySelectorAll('button, [role=img]')].filter(el => parseFloat(
              getComputedStyle(el.closest('.chart-tools') ?? el).opacity) > 0.5).length)""")
        assert max(beside) <= 2, beside
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"chart-words-custom-{size[0]}x{size[1]}.png"))


def page_head(pg) -> dict[str, Any]:
    """The page head's shown items (name, runs bar, view tabs, Copy link), each with its box's
    top and bottom, and the head's own height."""
    return pg.evaluate("""() => {
        const head = document.querySelector('.page-head');
        const items = [...head.children].filter(el => el.getClientRects().length > 0).map(el => {
          const r = el.getBoundingClientRect();
          return {what: el.id || el.className || el.tagName, top: r.top, bottom: r.bottom}; });
        return {height: head.getBoundingClientRect().height, items,
                link: document.querySelector('#page-link button')?.textContent ?? null}; }""")


def test_the_page_head_is_one_line_at_both_viewports(page, demo):
    """Name, runs bar, view tabs and Copy link on one line in the All and the Custom view (at
    1280×800 Copy link used to wrap onto a line of its own); with a run overlaid the runs bar
    may wrap inside its room, the tabs and Copy link stay on the name's line."""
    dash, run_id, baseline = demo
    for size in VIEWPORTS:
        for query in ("", "?view=custom"):
            page.set_viewport_size({"width": size[0], "height": size[1]})
            page.goto(f"{dash.url}/runs/{run_id}/metrics{query}")
            page.wait_for_selector("#page-link button")
            head = page_head(page)
            assert head["link"] == "Copy link"
            assert len(head["items"]) == 4, (size, query, head)
            tallest = max(i["bottom"] - i["top"] for i in head["items"])
            assert head["height"] <= tallest + 1, (size, query, head)
        page.goto(f"{dash.url}/runs/{run_id}/metrics?overlay={baseline}")
        page.wait_for_function("document.querySelectorAll('#runbar .run-chip').length === 2")
        name, *_, tabs, link = page_head(page)["items"]
        for item in (tabs, link):
            assert item["top"] < name["bottom"] and item["bottom"] > name["top"], (size, item)


# A composed chart's legend as laid out: the middle (px) of each of its controls (toggles, env
# filter) and of each environment's key, and each key name's widths (cut when scroll > client).
LEGEND = """card => {
    const lg = card.querySelector('[data-chart-legend]');
    const mid = el => {
      const r = el.getBoundingClientRect();
      return Math.round(r.top + r.height / 2); };
    return {title: card.querySelector('.chart-title').textContent,
      controls: [...lg.children].filter(el => !el.matches('.legend-keys')).map(mid),
      keys: [...lg.querySelectorAll('.env-key')].map(mid),
      names: [...lg.querySelectorAll('.env-key .legend-name')].map(n => ({
        text: n.textContent, whole: n.closest('.env-key').title, scroll: n.scrollWidth,
        client: n.clientWidth}))}; }"""


def legend(pg, card: Any) -> dict[str, Any]:
    return pg.evaluate(LEGEND, card)


def assert_two_lines_at_most(got: dict[str, Any], size: tuple[int, int]) -> None:
    """The toggles and the env filter on one line, the environments' keys together on that line
    or on the next (a line is ~19 px): two lines at most."""
    controls, keys = got["controls"], got["keys"]
    assert controls and keys, (size, got)
    assert max(controls) - min(controls) <= 2, (size, got)
    assert max(keys) - min(keys) <= 2, (size, got)
    assert -2 <= min(keys) - min(controls) <= 24, (size, got)


def test_environment_names_are_whole_in_the_all_view_at_both_viewports(page, demo):
    """Every environment key of a composed chart's legend says its whole name (at 4 columns,
    the "± std", "min/max" and env filter left "c…" / "hen…" of countdown and hendrycks_math):
    keys that do not fit beside the controls go on a line of their own under them."""
    dash, run_id, _ = demo
    for size in VIEWPORTS:
        open_all(page, dash, run_id, size)
        page.locator("[data-section='fixed:Data quality'] .section-toggle").click()
        checked = []
        cards = page.locator(".chart", has=page.locator("[data-chart-legend]"))
        for i in range(cards.count()):
            card = cards.nth(i)
            if not card.is_visible():
                continue
            card.scroll_into_view_if_needed()
            handle = card.element_handle()
            page.wait_for_function("card => card.classList.contains('rendered')", arg=handle,
                                   timeout=15_000)
            got = legend(page, handle)
            if not got["names"]:
                continue
            for name in got["names"]:
                assert 0 < name["scroll"] <= name["client"], (size, got["title"], name)
                assert name["text"] == name["whole"] or name["whole"] == "all environments together"
            assert_two_lines_at_most(got, size)
            checked.append(got["title"])
        # Reward, the sample metrics, Advantage, the token charts, Off-policy lag at least.
        for title in ("Reward", "correct", "reasoning_steps", "Advantage", "Off-policy lag"):
            assert title in checked, (size, title, checked)
        assert sum("tokens" in t for t in checked) >= 3, (size, checked)


def line_traces(fig: Any) -> list[Any]:
    return [t for t in fig["data"] if t["meta"] and t["meta"]["role"] in ("raw", "env")]


def test_each_environment_has_its_own_colour_and_overlaid_runs_theirs(page, demo):
    dash, run_id, _ = demo
    open_all(page, dash, run_id, VIEWPORTS[0])
    page.locator(f"[data-series-id='{REWARD}']").scroll_into_view_if_needed()
    fig = wait_chart(page, REWARD, "gd.data.filter(t => t.meta.role === 'env').length === 2")
    lines = line_traces(fig)
    envs = [t["meta"]["env"] for t in lines]
    assert envs == [None, "countdown", "hendrycks_math"]
    colours = [t["color"] for t in lines]
    assert len(set(colours)) == len(colours), colours  # every environment its own colour
    assert colours[0] == dash.get(f"/api/runs/{run_id}")["color"]  # all envs: the run's own
    card = page.locator(".chart", has=page.locator(f"[data-series-id='{REWARD}']"))
    keys = card.locator("[data-chart-legend] .env-key")
    assert [keys.nth(i).get_attribute("data-color") for i in range(keys.count())] == colours
    got = legend(page, card.element_handle())
    assert len(got["controls"]) == 3 and len(got["keys"]) == 3, got  # ± std, min/max, env filter
    assert_two_lines_at_most(got, VIEWPORTS[0])

    # Overlaid runs: each run its colour again (runs are told apart first), environments a dash.
    base = demo[2]
    colour = {r: dash.get(f"/api/runs/{r}")["color"] for r in (run_id, base)}
    open_all(page, dash, run_id, VIEWPORTS[0], f"?overlay={base}")
    page.locator(f"[data-series-id='{REWARD}']").scroll_into_view_if_needed()
    fig = wait_chart(page, REWARD, f"gd.data.filter(t => t.meta.role === 'env'"
                                   f" && t.meta.run === {base}).length === 2")
    lines = line_traces(fig)
    assert {t["meta"]["run"] for t in lines} == {run_id, base}
    for t in lines:
        assert t["color"] == colour[t["meta"]["run"]], t
    dashes = page.evaluate("""sid => document.querySelector(`[data-series-id="${CSS.escape(sid)}"]`)
        .data.filter(t => ['raw', 'env'].includes(t.meta.role))
        .map(t => [t.meta.env, t.line.dash ?? 'solid'])""", REWARD)
    assert all((dash_ == "solid") == (env is None) for env, dash_ in dashes), dashes
