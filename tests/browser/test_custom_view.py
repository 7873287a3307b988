"""The Custom view in Chromium: sections, groups and plots moved by real pointer drags (SortableJS)
within and across containers and by keyboard, metrics and groups dropped in from the metric
list, everything saved on the server for the project and shown again after a reload."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, unquote

import pytest

from tests.browser.conftest import ARTIFACTS, step
from tests.browser.test_metrics_page import open_metrics

pytestmark = pytest.mark.browser

KEYS = ["a", "b", "c", "d", "e", "f"]

# Where a drag stands once nothing moves (no SortableJS animation under way): 'ok' when the
# dragged element shows at `index` of list `container` (counting what SortableJS moves) and
# stays there: the pointer is on it, or still on the aimed spot of the target; 'moved' when it
# is elsewhere and the page reflowed, the target gone from under the pointer: aim again.
SETTLED = """([container, index, target, fx, fy, px, py]) => {
  if (document.querySelector('.board [style*="transform"]')) return false;
  const ghosts = document.querySelectorAll('.drop-ghost');
  if (ghosts.length !== 1) return false;
  const ghost = ghosts[0];
  const t = document.querySelector(target).getBoundingClientRect();
  const aimed = Math.abs(t.left + t.width * fx - px) <= 2
    && Math.abs(t.top + t.height * fy - py) <= 2;
  const onGhost = ghost.contains(document.elementFromPoint(px, py));
  const items = [...ghost.parentElement.children].filter((el) => el.matches(
    '.chart, .dash-group, .dash-section, .palette-item, .palette-group'));
  const there = ghost.parentElement.dataset.container === container
    && items.indexOf(ghost) === index;
  if (there && (aimed || onGhost)) return 'ok';
  return aimed ? false : 'moved';
}"""


def plot(pid: str, *keys: str, **extra: Any) -> dict[str, Any]:
    return {"type": "plot", "id": pid, "title": "", "wide": False, "settings": {},
            "series": [{"id": f"step|{k}||", "axis": "auto"} for k in keys], **extra}


def section(sid: str, title: str, *items: dict[str, Any], collapsed: bool = False) -> dict:
    return {"id": sid, "title": title, "collapsed": collapsed, "items": list(items)}


def group(gid: str, title: str, *plots: dict[str, Any]) -> dict[str, Any]:
    return {"type": "group", "id": gid, "title": title, "plots": list(plots)}


# One [a b c]   Two [G(d) e]
START = {"version": 2, "sections": [
    section("s1", "One", plot("pa", "a"), plot("pb", "b"), plot("pc", "c")),
    section("s2", "Two", group("g1", "G", plot("pd", "d")), plot("pe", "e")),
]}


def put_layout(pg, run_id: int, body: Any, name: str = "default") -> None:
    """Store a layout through the API, as another page (or a script) would."""
    status = pg.evaluate("""async ([runId, name, body]) => {
        const token = document.cookie.split('; ').find(c => c.startsWith('csrftoken=')).slice(10);
        const res = await fetch(`/api/runs/${runId}/layout?name=${encodeURIComponent(name)}`,
          {method: 'PUT', body: JSON.stringify(body),
           headers: {'X-CSRFToken': token, 'Content-Type': 'application/json'}});
        return res.status; }""", [run_id, name, body])
    assert status == 200


def open_custom(pg, dashboard, run: str, layout: Any = None) -> int:
    """The run's Custom view, with `layout` stored first (when given), on a screen tall enough
    for the whole board (a drag then never scrolls the page)."""
    pg.set_viewport_size({"width": 1400, "height": 1700})
    run_id = open_metrics(pg, dashboard, run, "?view=custom")
    if layout is not None:
        put_layout(pg, run_id, layout)
        pg.reload()
    pg.wait_for_selector(".palette-section")
    return run_id


def board(pg, keys: bool = False) -> list[Any]:
    """The board as shown: [[section title, [plot | [group title, [plots]]]]], a plot named by
    its title, or with `keys` by the keys of its series (as stored() names it)."""
    return pg.evaluate("""(keys) => {
      const title = (c) => c.querySelector('.chart-title');
      const name = (c) => keys ? title(c).title.split('\\n')
        .map((id) => decodeURIComponent(id.split('|')[1])).join(', ') : title(c).textContent;
      return [...document.querySelectorAll('.board > .dash-section')].map(s => [
        s.querySelector('.section-title').textContent,
        [...s.querySelector(':scope > .dash-body').children].map(el => el.matches('.dash-group')
          ? [el.querySelector('.group-title').textContent,
             [...el.querySelector('.dash-body').children].map(name)]
          : name(el))]); }""", keys)


def stored(dashboard, run_id: int, pg=None, name: str = "default") -> list[Any]:
    """The saved layout in board()'s shape (a plot named by its series' keys), once saved."""
    if pg is not None:
        pg.wait_for_function("document.querySelector('.save-status').textContent === 'Saved'")
    got = dashboard.get(f"/api/runs/{run_id}/layout?name={quote(name)}")
    assert got["version"] == 2

    def named(p: dict) -> str:
        return ", ".join(unquote(s["id"].split("|")[1]) for s in p["series"])

    return [[s["title"], [[it["title"], [named(p) for p in it["plots"]]] if it["type"] == "group"
                          else named(it) for it in s["items"]]] for s in got["sections"]]


def card(title: str) -> str:
    """A plot's card by its title (a Playwright selector)."""
    return f".board .chart:has(.chart-title:text-is('{title}'))"


def node(nid: str) -> str:
    """A section, group or plot by its node id (CSS: drag targets)."""
    return f".board [data-node-id='{nid}']"


def drag(pg, handle: str, target: str, fx: float, fy: float, container: str, index: int) -> None:
    """Press on `handle` (a Playwright selector), pull it out of its place in steps, then move
    the mouse to the spot (fx, fy) of `target`'s box (CSS), aiming again while the page
    reflows under the pointer, as a hand does; drop once SortableJS shows the element at
    `index` of list `container` (its data-container) and nothing moves. Where it then lands,
    the caller checks."""
    pg.locator(handle).first.scroll_into_view_if_needed()
    box = pg.locator(handle).first.bounding_box()
    x, y = box["x"] + min(14, box["width"] / 2), box["y"] + box["height"] / 2
    pg.mouse.move(x, y)
    pg.mouse.down()
    pg.mouse.move(x + 12, y + 12, steps=4)
    for _ in range(6):
        t = pg.locator(target).first.bounding_box()
        px, py = t["x"] + t["width"] * fx, t["y"] + t["height"] * fy
        pg.mouse.move(px, py)  # one move: the spot, not whatever lies on the way to it
        state = pg.wait_for_function(SETTLED, arg=[container, index, target, fx, fy, px, py])
        if state.json_value() == "ok":
            break
    else:
        raise AssertionError(f"{target} kept moving away from under the pointer")
    pg.mouse.up()
    pg.wait_for_function("document.querySelectorAll('.drop-ghost, .drag-fallback').length === 0")


def feed(dashboard, run: str, keys: list[str] = KEYS, steps: int = 4) -> None:
    dashboard.post([step(run, n, {k: float(n + i) for i, k in enumerate(keys)})
                    for n in range(steps)])


def test_plots_groups_and_sections_move_by_pointer_drags_to_the_exact_place(page, dashboard):
    feed(dashboard, "d1")
    run_id = open_custom(page, dashboard, "d1", START)
    page.wait_for_selector(card("e"))
    assert board(page) == [["One", ["a", "b", "c"]], ["Two", [["G", ["d"]], "e"]]]

    # Within a section: c onto the first half of a lands before it.
    drag(page, f"{card('c')} .chart-title", node("pa"), 0.25, 0.5, "s1", 0)
    assert board(page) == [["One", ["c", "a", "b"]], ["Two", [["G", ["d"]], "e"]]]
    # ... and onto the second half of b, after it.
    drag(page, f"{card('c')} .chart-title", node("pb"), 0.75, 0.5, "s1", 2)
    assert board(page) == [["One", ["a", "b", "c"]], ["Two", [["G", ["d"]], "e"]]]
    # Across containers: b into group G, before d; d out of G into One, after a.
    drag(page, f"{card('b')} .chart-title", node("pd"), 0.25, 0.5, "g1", 0)
    assert board(page) == [["One", ["a", "c"]], ["Two", [["G", ["b", "d"]], "e"]]]
    drag(page, f"{card('d')} .chart-title", node("pa"), 0.75, 0.5, "s1", 1)
    assert board(page) == [["One", ["a", "d", "c"]], ["Two", [["G", ["b"]], "e"]]]
    # A group by its header: into One, before its first plot (a group fills its row).
    drag(page, ".dash-group[data-node-id=g1] .dash-group-head h3", node("pa"), 0.3, 0.5, "s1", 0)
    assert board(page) == [["One", [["G", ["b"]], "a", "d", "c"]], ["Two", ["e"]]]
    # A section by its handle: Two above One.
    drag(page, ".dash-section[data-node-id=s2] .section-handle",
         ".dash-section[data-node-id=s1] .dash-section-head", 0.5, 0.3, ":root", 0)
    want = [["Two", ["e"]], ["One", [["G", ["b"]], "a", "d", "c"]]]
    assert board(page) == want
    assert stored(dashboard, run_id, page) == board(page, keys=True)
    page.reload()  # a reload keeps everything
    page.wait_for_selector(card("c"))
    assert board(page) == want


def test_metrics_and_groups_drop_in_from_the_list_as_new_plots(page, dashboard):
    feed(dashboard, "d2", ["kl", "perf/gpu/util", "perf/gpu/mem", "entropy"])
    run_id = open_custom(page, dashboard, "d2", {"version": 2, "sections": [
        section("s1", "Main", plot("pa", "entropy"))]})
    assert page.is_hidden(".board-hint")
    kl = ".palette-item[data-metric-id='step|kl||']"
    drag(page, kl, node("pa"), 0.2, 0.5, "s1", 0)  # a metric: a plot, where it was dropped
    assert board(page) == [["Main", ["kl", "Entropy"]]]
    assert page.locator(kl).count() == 1  # the list keeps its metric
    drag(page, kl, node("pa"), 0.8, 0.5, "s1", 2)  # again: the same metric twice
    assert board(page) == [["Main", ["kl", "Entropy", "kl"]]]
    drag(page, ".palette-group:has(.palette-name:text-is('gpu')) .palette-group-head .count",
         node("pa"), 0.2, 0.5, "s1", 1)  # a group of the list: a group of its plots
    gpu = ["gpu", ["perf/gpu/util", "perf/gpu/mem"]]
    assert board(page) == [["Main", ["kl", gpu, "Entropy", "kl"]]]
    drag(page, kl, ".new-section-drop", 0.5, 0.5, ":new", 0)  # onto the end: a new section
    want = [["Main", ["kl", gpu, "Entropy", "kl"]], ["General", ["kl"]]]
    assert board(page) == want
    assert "on-board" in page.get_attribute(kl, "class")
    page.click(".palette-item[data-metric-id='step|entropy||'] button.add")  # Add: the end
    want[1][1].append("Entropy")
    assert board(page) == want
    assert stored(dashboard, run_id, page) == board(page, keys=True)
    # The tree starts open; a section closed stays closed in this browser.
    page.click(".palette-toggle[data-toggle='general']")
    assert page.is_hidden(kl)
    page.reload()
    page.wait_for_selector(".palette-item[data-metric-id='step|perf%2Fgpu%2Futil||']")
    assert page.is_hidden(kl)
    assert page.get_attribute(".palette-toggle[data-toggle='general']", "aria-expanded") == "false"


def test_the_keyboard_moves_renames_collapses_widens_and_removes(page, dashboard):
    feed(dashboard, "k1")
    run_id = open_custom(page, dashboard, "k1", START)
    page.wait_for_selector(card("e"))

    def press(title: str, tool: str, times: int = 1) -> None:
        page.focus(f"{card(title)} [data-tool='{tool}']")
        for _ in range(times):
            page.keyboard.press("Enter")
            # the focus stays on the button, which went with its plot
            assert page.evaluate("document.activeElement.closest('.chart')"
                                 "?.querySelector('.chart-title').textContent") == title

    press("c", "Move later")  # past the end of One: into Two, before the group
    assert board(page) == [["One", ["a", "b"]], ["Two", ["c", ["G", ["d"]], "e"]]]
    press("c", "Move later")  # into the group it meets
    assert board(page) == [["One", ["a", "b"]], ["Two", [["G", ["c", "d"]], "e"]]]
    press("c", "Move later", 2)  # through it and out
    assert board(page) == [["One", ["a", "b"]], ["Two", [["G", ["d"]], "c", "e"]]]
    press("a", "Move earlier")  # first of all: stays
    assert board(page) == [["One", ["a", "b"]], ["Two", [["G", ["d"]], "c", "e"]]]
    page.focus(".dash-group[data-node-id=g1] [data-tool='Move earlier']")
    page.keyboard.press("Enter")  # the group: to the end of One
    assert board(page) == [["One", ["a", "b", ["G", ["d"]]]], ["Two", ["c", "e"]]]
    page.focus(".dash-section[data-node-id=s2] [data-tool='Move earlier']")
    page.keyboard.press("Enter")
    assert board(page)[0][0] == "Two"
    assert page.evaluate("document.activeElement.dataset.tool") == "Move earlier"

    page.focus(".dash-section[data-node-id=s2] [data-tool='Rename']")
    page.keyboard.press("Enter")
    page.keyboard.press("Control+a")
    page.keyboard.type("Second")
    page.keyboard.press("Enter")
    page.focus(f"{card('e')} [data-tool='Rename']")
    page.keyboard.press("Enter")
    page.keyboard.type("Eee")
    page.keyboard.press("Escape")  # Escape keeps the old title
    assert board(page)[0] == ["Second", ["c", "e"]]
    page.focus(".dash-section[data-node-id=s1] .section-toggle")
    page.keyboard.press("Enter")  # collapsed: its plots are hidden, and it stays so
    assert page.get_attribute(".dash-section[data-node-id=s1] .section-toggle",
                              "aria-expanded") == "false"
    assert page.is_hidden(card("a"))
    page.focus(f"{card('e')} [data-tool='Toggle wide']")
    page.keyboard.press("Enter")
    page.focus(f"{card('c')} [data-tool='Remove']")
    page.keyboard.press("Enter")  # the focus moves on to the next plot
    assert page.evaluate("document.activeElement.closest('.chart')"
                         "?.querySelector('.chart-title').textContent") == "e"
    want = [["Second", ["e"]], ["One", ["a", "b", ["G", ["d"]]]]]
    assert board(page) == want
    assert stored(dashboard, run_id, page) == want
    page.reload()
    page.wait_for_selector(card("e"))
    assert board(page) == want
    assert page.is_hidden(card("a"))
    assert "wide" in page.get_attribute(card("e"), "class")


def test_a_section_or_group_is_added_named_and_removed(page, dashboard):
    feed(dashboard, "n1")
    run_id = open_custom(page, dashboard, "n1", START)
    page.wait_for_selector(card("e"))
    page.click(".add-section")  # a new section, its title ready to type
    page.keyboard.type("Third")
    page.keyboard.press("Enter")
    page.click(".dash-section[data-node-id=s3] [data-tool='Add group']")
    page.click(".dash-section[data-node-id=s3] .dash-group [data-tool='Rename']")
    page.keyboard.press("Control+a")
    page.keyboard.type("Losses")
    page.keyboard.press("Enter")
    drag(page, f"{card('a')} .chart-title", ".dash-section[data-node-id=s3] .dash-group .dash-body",
         0.5, 0.5, "g2", 0)  # into the empty group
    assert board(page)[2] == ["Third", [["Losses", ["a"]]]]
    page.once("dialog", lambda d: d.accept())
    page.click(".dash-group[data-node-id=g1] [data-tool='Remove']")  # G with d: asked first
    want = [["One", ["b", "c"]], ["Two", ["e"]], ["Third", [["Losses", ["a"]]]]]
    assert board(page) == want
    assert stored(dashboard, run_id, page) == want
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "custom-view.png"))
