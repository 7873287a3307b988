"""Browser benchmark: the Metrics page in headless Chromium (the system one) against one server
process on the embedded default.

Two runs to load (`--run`):
- `demo` (the default): the demo run (`manage.py demo`: 200 steps, ~70 charts), at 1600×1000 and
  1280×800 — the first screen, cold and warm;
- `big`: 10,000 steps × 300 step metrics (300 charts), at 1400×900 — the first screen, then live
  latency and heap.

What is measured, from navigation start, as the median of `--loads` loads (min and max beside
it), each figure with the machine's load average (`os.getloadavg()`, 1 minute, its range over
the loads):
- first screen drawn: the first frame painted with every chart whose card intersects the
  viewport showing its data — as a canvas sketch (while Plotly is still evaluating) or as a
  Plotly chart. Read after that frame's animation callbacks and layout (a ResizeObserver's
  callback), before its paint: the page draws in animation callbacks, and the next frame's
  start may come only after a long task (Plotly's evaluation follows the sketches at once);
- first screen interactive: the first animation frame in which every one of them is a Plotly
  chart with its data (hover, zoom and the chart's tools work) and the controls bar is built
  (its search field is there). The check runs in an animation frame, so the main thread was
  free at that moment: an input then is handled in that frame. Target ≤ 1.0 s cold, ≤ 0.5 s
  warm on the demo;
- cold: in a fresh browser context (empty HTTP cache, no compiled code); warm: the same URL
  loaded again in that context (HTTP cache and V8's code cache warm);
- `big` only: live latency, a step acked by the server (WebSocket ingest) → its point drawn on
  a visible chart (p50 ≤ 100 ms, p99 ≤ 300 ms); JS heap after scrolling the whole page top to
  bottom (≤ 300 MB).

`--compare CHECKOUT` serves another checkout of the project (e.g. `git worktree add` of an
earlier commit) beside this one, on the same data, and alternates their loads — before and
after in one run, under the same load, rather than across time.

Run: .venv/bin/python bench/browser.py [--run demo|big] [--loads 5] [--data-dir DIR]
[--compare CHECKOUT] [--timeline] (--data-dir keeps the run between invocations; the big run's
ingest takes a few minutes. --timeline prints, for each cold load, when the page, its static
files and its first series arrived.)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from devtools.live_server import LiveServer, ServerState, free_port, running  # noqa: E402

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
RUN = "bench-browser"
DEMO = "grpo-demo"
T0 = 1_700_000_000.0
VIEWPORTS = {"demo": [(1600, 1000), (1280, 800)], "big": [(1400, 900)]}


def keys(n: int) -> list[str]:
    """n step keys spread over sections and groups (`sec/group/metric`)."""
    return [f"sec{i // 50}/grp{(i // 10) % 5}/metric_{i}" for i in range(n)]


def metrics(step: int, names: list[str]) -> dict[str, float]:
    return {k: math.sin(step / 300 + i) + 0.05 * math.sin(step * 7.3 + i * 1.7)
            for i, k in enumerate(names)}


class Client:
    def __init__(self, server: LiveServer, token: str) -> None:
        self.server, self.token = server, token

    def post(self, messages: list[dict[str, Any]]) -> None:
        req = urllib.request.Request(
            self.server.http + "/api/ingest", data=json.dumps(messages).encode(), method="POST",
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=300) as res:
            body = json.loads(res.read())
        if body["errors"]:
            raise RuntimeError(body["errors"][:3])

    def get(self, path: str) -> Any:
        with urllib.request.urlopen(self.server.http + path, timeout=60) as res:
            return json.loads(res.read())

    def run_id(self, name: str = RUN) -> int | None:
        return next((r["id"] for r in self.get("/api/runs")["runs"] if r["name"] == name), None)


def ingest(client: Client, steps: int, names: list[str], batch: int = 100) -> None:
    start = time.perf_counter()
    for first in range(0, steps, batch):
        client.post([{"v": 1, "id": f"bench-{n}", "type": "step", "run": RUN, "step": n,
                      "time": T0 + 10.0 * n, "metrics": metrics(n, names)}
                     for n in range(first, min(steps, first + batch))])
        done = min(steps, first + batch)
        rate = done / (time.perf_counter() - start)
        if done % 1000 == 0 or done == steps:
            print(f"  ingest {done}/{steps} steps ({rate:.0f} steps/s)", flush=True)


# The first screen (the module's docstring): every chart in the viewport drawn with its data,
# as a sketch (canvas, while plotly.min.js is still evaluating) or as a Plotly chart, read in
# each frame once its animation callbacks ran (a ResizeObserver on a 1-px probe resized every
# frame: its callback comes after them and layout, before the paint); and every one of them a
# Plotly chart with the controls bar built, read at the start of the next frame (the main thread
# free: an input is handled then). Both read in the page from its first frame on: an init
# script of the browser context (a wait started from here begins only once Playwright's
# evaluation reaches the page, which on a busy machine came after a warm load's sketches).
FIRST_SCREEN = """(() => {
  if (!/\\/metrics$/.test(location.pathname)) return;
  const timeoutMs = 60000;
  window.__firstScreen = new Promise((resolve, reject) => {
    const done = plotlyOnly => {
      const charts = [...document.querySelectorAll('.chart')];
      if (!charts.length) return false;
      if (plotlyOnly && !document.querySelector('#controls input[type=search]')) return false;
      const h = innerHeight;
      const inView = charts.filter(c => { const r = c.getBoundingClientRect();
                                          return r.bottom > 0 && r.top < h && !c.hidden; });
      return inView.length > 0 && inView.every(c => { const gd = c.querySelector('.plot');
        if (!plotlyOnly && c.classList.contains('sketched')) return true;
        return c.classList.contains('rendered') && gd.data
          && gd.data.some(t => t.x && t.x.length > 0); });
    };
    let drawn = null;
    const probe = document.createElement('div');
    probe.style.cssText = 'position:fixed;left:0;top:0;height:1px;width:1px;visibility:hidden';
    const painted = new ResizeObserver(() => {
      if (drawn === null && done(false)) drawn = performance.now();
    });
    document.addEventListener('DOMContentLoaded', () => {
      document.body.append(probe);
      painted.observe(probe);
    });
    const finish = (value) => { painted.disconnect(); probe.remove(); return value; };
    const frame = () => {
      const now = performance.now();
      if (drawn === null && done(false)) drawn = now;
      if (drawn !== null && done(true)) return resolve(finish([drawn, now]));
      if (now > timeoutMs) return reject(finish(new Error('first screen not drawn in time')));
      probe.style.width = probe.style.width === '1px' ? '2px' : '1px';
      requestAnimationFrame(frame);
    };
    frame();
  });
})()"""


def new_context(browser: Any, **options: Any) -> Any:
    """A fresh browser context whose Metrics pages time their first screen (FIRST_SCREEN)."""
    ctx = browser.new_context(**options)
    ctx.add_init_script(FIRST_SCREEN)
    return ctx


def first_screen(page: Any, url: str) -> tuple[float, float]:
    """(ms to the first screen drawn, ms to the first screen interactive); `page` of a
    `new_context`."""
    page.goto(url, wait_until="commit")
    drawn, interactive = page.evaluate("window.__firstScreen")
    return float(drawn), float(interactive)


TIMELINE = """() => {
  const nav = performance.getEntriesByType('navigation')[0];
  const res = performance.getEntriesByType('resource');
  const files = res.filter(e => new URL(e.name).pathname.startsWith('/static/'));
  const modules = files.filter(e => e.name.endsWith('.js') && !e.name.includes('/vendor/plotly/'));
  const series = res.filter(e => e.name.includes('/series?'));
  const at = (list, key, pick) => list.length ? Math.round(pick(...list.map(e => e[key]))) : null;
  return [['page received', Math.round(nav.responseEnd)],
          ['first static file asked for', at(files, 'startTime', Math.min)],
          [`last of ${modules.length} modules received`, at(modules, 'responseEnd', Math.max)],
          ['plotly.min.js received', at(files.filter(e => e.name.includes('/vendor/plotly/')),
                                        'responseEnd', Math.max)],
          ['DOMContentLoaded (modules ran, page built)', Math.round(nav.domContentLoadedEventEnd)],
          ['first series request sent', at(series, 'startTime', Math.min)],
          ['first series response received', at(series, 'responseEnd', Math.min)],
          ...[['modules', 'metrics.js running'], ['plotly-asked', 'plotly.min.js asked for'],
              ['plotly-ready', 'Plotly evaluated']].map(([name, what]) => {
            const m = performance.getEntriesByName(`telescope:${name}`, 'mark')[0];
            return [what, m ? Math.round(m.startTime) : null];
          })];
}"""


def timeline(page: Any) -> list[tuple[str, int | None]]:
    """Where a load spent its time: ms since navigation start of each step before the first
    screen (read from the page's resource timings)."""
    return [(name, ms) for name, ms in page.evaluate(TIMELINE)]


def live_latency(page: Any, server: LiveServer, token: str, names: list[str], start_step: int,
                 count: int, interval: float) -> tuple[list[float], list[float], list[float]]:
    """Per live step: ack → drawn, ack → delta in the page, delta → drawn (ms)."""
    from websockets.sync.client import connect

    sid = "step|" + urllib.parse.quote(names[0], safe="") + "||"
    page.evaluate("""sid => { const drawn = window.__drawn = {}, arrived = window.__arrived = {};
      document.addEventListener('telescope:drawn', e => {
        const s = e.detail.lastStep;
        if (e.detail.id === sid && s !== null && !(s in drawn)) drawn[s] = Date.now(); });
      const apply = telescope.onDelta.bind(telescope);
      telescope.onDelta = msg => { const p = msg.points[sid];
        if (p) for (const s of p.step) if (!(s in arrived)) arrived[s] = Date.now();
        apply(msg); }; }""", sid)
    acked: dict[int, float] = {}
    with connect(server.ws + "/ws/ingest/",
                 additional_headers={"Authorization": f"Bearer {token}"}) as ws:
        for k in range(count):
            n = start_step + k
            msg = {"v": 1, "id": f"live-{n}", "type": "step", "run": RUN, "step": n,
                   "time": T0 + 10.0 * n, "metrics": metrics(n, names)}
            ws.send(json.dumps(msg))
            while True:
                reply = json.loads(ws.recv(timeout=30))
                if reply.get("id") == msg["id"]:
                    acked[n] = time.time() * 1000
                    break
            time.sleep(interval)
    page.wait_for_timeout(1000)
    drawn, arrived = page.evaluate("[window.__drawn, window.__arrived]")
    keys = [n for n in acked if str(n) in drawn and str(n) in arrived]
    return ([drawn[str(n)] - acked[n] for n in keys],
            [arrived[str(n)] - acked[n] for n in keys],
            [drawn[str(n)] - arrived[str(n)] for n in keys])


def heap_after_scroll(page: Any) -> tuple[float, float, int]:
    cdp = page.context.new_cdp_session(page)
    cdp.send("Performance.enable")
    height = page.evaluate("document.body.scrollHeight")
    y, step = 0, page.evaluate("innerHeight")
    max_rendered = 0
    while y < height:
        y += step
        page.evaluate(f"window.scrollTo(0, {y})")
        page.wait_for_timeout(120)
        max_rendered = max(max_rendered, page.evaluate(
            "document.querySelectorAll('.chart.rendered').length"))
        height = page.evaluate("document.body.scrollHeight")
    page.wait_for_timeout(1000)
    used = _heap(cdp)
    cdp.send("HeapProfiler.collectGarbage")
    return used, _heap(cdp), max_rendered


def _heap(cdp: Any) -> float:
    found = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
    return float(found["JSHeapUsedSize"]) / 2**20


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


@contextmanager
def other_checkout(checkout: Path, state: ServerState) -> Iterator[str]:
    """A server of another checkout of the project on `state`'s data, its own static files
    collected from that checkout: its base URL for the `with` block."""
    static = Path(tempfile.mkdtemp(prefix="telescope-compare-static-"))
    env = {**state.env, "PYTHONPATH": str(checkout), "TELESCOPE_STATIC_ROOT": str(static)}
    subprocess.run([sys.executable, "manage.py", "collectstatic", "--noinput", "-v", "0"],
                   env=env, cwd=checkout, check=True, timeout=300)
    port = free_port()
    with open(state.tmp / f"compare-{port}.log", "ab") as log:
        proc = subprocess.Popen([sys.executable, "-m", "telescope_ui.serve", "--port", str(port),
                                 "--verbosity", "0", "--no-collectstatic"],
                                env=env, cwd=checkout, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(base + "/api/runs", timeout=1).read()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"{checkout}'s server did not start") from None
                time.sleep(0.2)
        yield base
    finally:
        proc.terminate()
        proc.wait(10)


class Loads:
    """First-screen figures of one page (cold and warm, per viewport) and the load averages
    seen while measuring them."""

    def __init__(self) -> None:
        self.cold: list[tuple[float, float]] = []
        self.warm: list[tuple[float, float]] = []
        self.load: list[float] = []

    def measure(self, browser: Any, url: str, viewport: tuple[int, int], timeline_too: bool
                ) -> None:
        ctx = new_context(browser, viewport={"width": viewport[0], "height": viewport[1]})
        page = ctx.new_page()
        self.load.append(os.getloadavg()[0])
        self.cold.append(first_screen(page, url))
        if timeline_too:
            print("  cold load: " + "; ".join(f"{name} {ms}" for name, ms in timeline(page))
                  + f"; first screen drawn {self.cold[-1][0]:.0f} ms", flush=True)
        self.warm.append(first_screen(page, url))
        self.load.append(os.getloadavg()[0])
        ctx.close()

    def report(self, label: str, targets: bool) -> None:
        print(f"{label}  (load {min(self.load):.1f}–{max(self.load):.1f})")
        for name, loads, target in (("cold", self.cold, 1000), ("warm", self.warm, 500)):
            for i, what in ((0, "drawn"), (1, "interactive")):
                ms = [load[i] for load in loads]
                goal = f"   target ≤ {target} ms" if targets and i == 1 else ""
                print(f"  first screen {what}, {name}: median {statistics.median(ms):.0f} ms "
                      f"(min {min(ms):.0f}, max {max(ms):.0f}){goal}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", choices=("demo", "big"), default="demo")
    parser.add_argument("--steps", type=int, default=10_000, help="big run: steps")
    parser.add_argument("--charts", type=int, default=300, help="big run: step metrics")
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument("--loads", type=int, default=5)
    parser.add_argument("--compare", type=Path, default=None, metavar="CHECKOUT",
                        help="another checkout to serve beside this one, loads alternated")
    parser.add_argument("--live", type=int, default=100, help="big run: live steps to time")
    parser.add_argument("--interval", type=float, default=0.5, help="seconds between live steps")
    parser.add_argument("--timeline", action="store_true",
                        help="print where each cold load spent its time before the first screen")
    args = parser.parse_args()

    from playwright.sync_api import sync_playwright

    data_dir = args.data_dir or Path(tempfile.mkdtemp(prefix="telescope-bench-"))
    data_dir.mkdir(parents=True, exist_ok=True)
    state = ServerState(data_dir)
    with running(state) as server:
        token = state.token("bench")
        client = Client(server, token)
        names = keys(args.charts)
        name = DEMO if args.run == "demo" else RUN
        run_id = client.run_id(name)
        if run_id is None and args.run == "demo":
            print("loading the demo run (manage.py demo)", flush=True)
            state.manage("demo", "--run", DEMO, timeout=600)
        elif run_id is None:
            print(f"building a run of {args.steps} steps × {args.charts} metrics")
            ingest(client, args.steps, names)
        run_id = client.run_id(name)
        last = client.get(f"/api/runs/{run_id}")["last_step"]
        path = f"/runs/{run_id}/metrics"
        with sync_playwright() as pw, (
                other_checkout(args.compare, state) if args.compare else _nothing()) as other:
            browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
            pages = {"this checkout": server.http + path}
            if other:
                pages[f"{args.compare}"] = other + path
            results = {(label, vp): Loads() for label in pages for vp in VIEWPORTS[args.run]}
            for _ in range(args.loads):
                for vp in VIEWPORTS[args.run]:
                    for label, url in pages.items():
                        results[(label, vp)].measure(browser, url, vp, args.timeline)
            charts = 0
            if args.run == "big":
                ctx = new_context(browser, viewport={"width": 1400, "height": 900})
                page = ctx.new_page()
                first_screen(page, pages["this checkout"])
                page.wait_for_timeout(1000)
                lat, transit, draw = live_latency(page, server, token, names, last + 1,
                                                  args.live, args.interval)
                used, after_gc, max_rendered = heap_after_scroll(page)
                charts = page.evaluate("document.querySelectorAll('.chart').length")
                ctx.close()
            else:
                ctx = new_context(browser)
                page = ctx.new_page()
                first_screen(page, pages["this checkout"])
                charts = page.evaluate("document.querySelectorAll('.chart').length")
                ctx.close()
            browser.close()

    print(f"run {name}: {last + 1} steps × {charts} charts; medians of {args.loads} loads")
    for (label, vp), loads in results.items():
        loads.report(f"{label}, {vp[0]}×{vp[1]}:", targets=args.run == "demo")
    if args.run != "big":
        return
    print(f"(+{args.live} live steps)")
    if lat:
        print(f"live latency ack → drawn: p50 {pct(lat, 0.5):.0f} ms, p99 {pct(lat, 0.99):.0f} ms, "
              f"max {max(lat):.0f} ms over {len(lat)}/{args.live} steps   "
              "target p50 ≤ 100, p99 ≤ 300 ms")
        print(f"  of which ack → delta in the page: p50 {pct(transit, 0.5):.0f}, "
              f"p99 {pct(transit, 0.99):.0f} ms; delta → drawn: p50 {pct(draw, 0.5):.0f}, "
              f"p99 {pct(draw, 0.99):.0f} ms")
    else:
        print("live latency: no point drawn")
    print(f"JS heap after scrolling the whole page: {used:.0f} MB ({after_gc:.0f} MB after GC), "
          f"at most {max_rendered} charts rendered at once   target ≤ 300 MB")


@contextmanager
def _nothing() -> Iterator[None]:
    yield None


if __name__ == "__main__":
    main()
