"""Browser benchmark: the Timeline page drawing a window of 100,000 spans in headless Chromium
(the system one; --disable-gpu, so the spans' WebGL canvas is software-rendered) against one
server process on the embedded default.

The run: 64 inference lanes (8 servers × 8 slots) of generations in every status, and 4
trainer ranks of train_step spans with forward and backward nested in them, 100,000 spans in
all (--spans), over 10 minutes, opened with that window in the URL.

Prints, per cold load (a fresh browser context: nothing cached), in ms since navigation start:
the events response received, the spans laid out (rows, segments), Plotly ready, and the spans
drawn on screen; then the medians of the cold draw (events response → drawn: target ≤ 1.5 s)
and of the whole cold load (navigation → drawn), a zoom's refetch and redraw, and the read
API's own time for the window. Figures only: no assertion.

Run: .venv/bin/python bench/timeline_page.py [--spans 100000] [--loads 5] [--data-dir DIR]
(--data-dir keeps the ingested run between invocations.)
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from devtools.live_server import LiveServer, ServerState, running  # noqa: E402

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
RUN = "bench-timeline"
T0 = 1_700_000_000.0
WINDOW = 600.0  # seconds
SERVERS, SLOTS, RANKS = 8, 8, 4
STATUSES = [None, None, None, "discarded", "canceled", "eval"]
PER_MESSAGE = 20_000


def spans(total: int) -> list[dict[str, list[Any]]]:
    """Columns of the run's events, split into messages: 80% generations spread over the
    lanes, 20% trainer spans (train_step with forward and backward inside), all in WINDOW."""
    gens = total * 4 // 5
    lanes = SERVERS * SLOTS
    per_lane = gens // lanes
    cols: dict[str, list[Any]] = {k: [] for k in (
        "name", "start", "end", "source", "step", "rank", "server", "slot", "status", "tokens",
        "sample_id")}

    def add(name: str, start: float, end: float, source: str, **rest: Any) -> None:
        cols["name"].append(name)
        cols["start"].append(round(start, 6))
        cols["end"].append(round(end, 6))
        cols["source"].append(source)
        for k in ("step", "rank", "server", "slot", "status", "tokens", "sample_id"):
            cols[k].append(rest.get(k))

    length = WINDOW / per_lane
    for lane in range(lanes):
        for k in range(per_lane):
            start = T0 + k * length + (lane % 7) * 0.01
            add("generation", start, start + length * 0.9, "inference", server=lane // SLOTS,
                slot=lane % SLOTS, step=k // 10, status=STATUSES[(lane + k) % len(STATUSES)],
                tokens=200 + k % 300, sample_id=f"s-{lane}-{k}")
    steps = (total - lanes * per_lane) // (3 * RANKS)
    step_len = WINDOW / max(steps, 1)
    for s in range(steps):
        for r in range(RANKS):
            start = T0 + s * step_len
            add("train_step", start, start + step_len * 0.95, "trainer", step=s, rank=r)
            add("train_step/forward", start + step_len * 0.05, start + step_len * 0.4, "trainer",
                step=s, rank=r)
            add("train_step/backward", start + step_len * 0.45, start + step_len * 0.9,
                "trainer", step=s, rank=r)
    n = len(cols["name"])
    return [{k: v[i:i + PER_MESSAGE] for k, v in cols.items()} for i in range(0, n, PER_MESSAGE)]


def post(server: LiveServer, token: str, messages: list[dict[str, Any]]) -> None:
    req = urllib.request.Request(
        server.http + "/api/ingest", data=json.dumps(messages).encode(), method="POST",
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as res:
        body = json.loads(res.read())
    if body["errors"]:
        raise RuntimeError(body["errors"][:3])


def get(server: LiveServer, path: str) -> Any:
    with urllib.request.urlopen(server.http + path, timeout=120) as res:
        return json.loads(res.read())


def run_id(server: LiveServer) -> int | None:
    return next((r["id"] for r in get(server, "/api/runs")["runs"] if r["name"] == RUN), None)


def build(server: LiveServer, token: str, total: int) -> int:
    found = run_id(server)
    if found is not None:
        return found
    print(f"building a run of {total} spans", flush=True)
    for i, cols in enumerate(spans(total)):
        post(server, token, [{"v": 1, "id": f"bench-ev-{i}", "type": "events", "run": RUN,
                              **cols}])
    post(server, token, [{"v": 1, "id": "bench-barrier", "type": "barrier", "run": RUN}])
    found = run_id(server)
    assert found is not None
    return found


DRAWN = """want => { const root = document.getElementById('timeline');
  const p = window.telescopeTimeline;
  if (!root || !p || root.dataset.spans !== String(want) || !p.timings || !p.timings.drawn)
    return false;
  return true; }"""


def cold_load(browser: Any, url: str, total: int) -> dict[str, float]:
    """One load in a fresh context: the page's timings (ms since navigation start), the
    drawn time taken at the next animation frame (the frame that shows the spans)."""
    ctx = browser.new_context(viewport={"width": 1400, "height": 900})
    page = ctx.new_page()
    page.goto(url, wait_until="commit")
    page.wait_for_function(DRAWN, arg=total, polling="raf", timeout=120_000)
    found = page.evaluate("""() => new Promise(resolve => requestAnimationFrame(() =>
        resolve({...window.telescopeTimeline.timings, painted: performance.now(),
                 kind: window.telescopeTimeline.spans.kind})))""")
    zoom = zoom_redraw(page)
    ctx.close()
    return {**found, "zoom": zoom}


def zoom_redraw(page: Any) -> float:
    """A zoom to the window's middle half: relayout → refetched and drawn (ms)."""
    return float(page.evaluate("""() => new Promise(resolve => {
      const p = window.telescopeTimeline; const draws = p.draws;
      const [a, b] = [p.win.start - p.origin, p.win.end - p.origin];
      const t0 = performance.now();
      window.Plotly.relayout(document.getElementById('gantt'),
        {'xaxis.range[0]': a + (b - a) / 4, 'xaxis.range[1]': b - (b - a) / 4});
      const wait = () => (p.draws > draws ? requestAnimationFrame(() =>
        resolve(performance.now() - t0)) : requestAnimationFrame(wait));
      wait(); })"""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spans", type=int, default=100_000)
    parser.add_argument("--loads", type=int, default=5)
    parser.add_argument("--data-dir", type=Path, default=None)
    args = parser.parse_args()

    from playwright.sync_api import sync_playwright

    data_dir = args.data_dir or Path(tempfile.mkdtemp(prefix="telescope-bench-"))
    data_dir.mkdir(parents=True, exist_ok=True)
    state = ServerState(data_dir)
    with running(state) as server:
        rid = build(server, state.token("bench"), args.spans)
        window = f"start={T0 - 1}&end={T0 + WINDOW + 1}"
        api_ms = []
        for _ in range(3):
            t = time.perf_counter()
            body = get(server, f"/api/runs/{rid}/events?{window}")
            api_ms.append((time.perf_counter() - t) * 1000)
        total = len(body["events"]["name"])
        url = f"{server.http}/runs/{rid}/timeline?{window}"
        loads = []
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
            for _ in range(args.loads):
                t = cold_load(browser, url, total)
                loads.append(t)
                print(f"cold load: events response {t['received']:.0f} ms, laid out "
                      f"{t['built']:.0f}, Plotly ready {t['plotly']:.0f}, drawn {t['drawn']:.0f}, "
                      f"on screen {t['painted']:.0f}; zoom → redrawn {t['zoom']:.0f} ms",
                      flush=True)
            browser.close()

    def median(f: Any) -> float:
        return statistics.median(f(t) for t in loads)

    print(f"window: {total} spans in {WINDOW:.0f} s, {SERVERS * SLOTS} inference lanes + "
          f"{RANKS} ranks; spans drawn with {loads[0]['kind']}")
    print(f"read API GET /events of the window: median {statistics.median(api_ms):.0f} ms")
    print(f"cold draw (events response → on screen): median "
          f"{median(lambda t: t['painted'] - t['received']):.0f} ms   target ≤ 1500 ms")
    print(f"  of which laying out {median(lambda t: t['built'] - t['received']):.0f} ms, "
          f"Plotly (axes, legend, instants) and the spans' canvas "
          f"{median(lambda t: t['drawn'] - t['plotly']):.0f} ms")
    print(f"cold load (navigation → on screen): median {median(lambda t: t['painted']):.0f} ms "
          f"(request to response {median(lambda t: t['received'] - t['asked']):.0f} ms)")
    print(f"zoom (relayout → refetched, on screen): median {median(lambda t: t['zoom']):.0f} ms")


if __name__ == "__main__":
    main()
