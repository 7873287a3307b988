"""The README's screenshots: a live server with the demo run (`manage.py demo`, as `make run`
loads it) in a fresh data directory, its pages opened in headless Chromium (Debian's
/usr/bin/chromium through Playwright), each saved as a PNG under docs/img/.

    .venv/bin/python devtools/screenshots.py [--out docs/img] [--width 1100 --height 700]

A modest viewport keeps each PNG small (the README's are committed only under 300 KB each).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from devtools.live_server import ServerState, running  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]

# (file name, path, what to wait for before the shot)
PAGES = [
    ("overview.png", "/runs/{run}", ".js-plotly-plot"),
    ("metrics-all.png", "/runs/{run}/metrics", ".js-plotly-plot"),
    ("samples.png", "/runs/{run}/samples?step=120", "table, .sample, [data-sample]"),
    ("timeline.png", "/runs/{run}/timeline", "#gantt canvas"),
    ("performance.png", "/runs/{run}/performance", "#performance .js-plotly-plot"),
]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=ROOT / "docs" / "img")
    p.add_argument("--width", type=int, default=1100)
    p.add_argument("--height", type=int, default=700)
    args = p.parse_args()
    from playwright.sync_api import sync_playwright

    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="telescope-shots-") as tmp:
        state = ServerState(Path(tmp))
        state.manage("demo", timeout=600)
        with running(state) as server, sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": args.width, "height": args.height})
            page.goto(server.http + "/api/runs")
            runs = page.evaluate("() => JSON.parse(document.body.innerText)")
            runs = runs.get("runs", runs) if isinstance(runs, dict) else runs
            run = runs[0]["id"]
            for name, path, selector in PAGES:
                page.goto(server.http + path.format(run=run), wait_until="networkidle")
                try:
                    page.wait_for_selector(selector, timeout=15_000)
                except Exception:  # noqa: BLE001 - the shot still says what the page shows
                    print(f"{name}: {selector!r} did not appear", file=sys.stderr)
                page.wait_for_timeout(1500)  # charts drawn, transitions over
                target = args.out / name
                page.screenshot(path=str(target))
                print(f"{target.relative_to(ROOT)}: {target.stat().st_size / 1024:.0f} KB")
            browser.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
