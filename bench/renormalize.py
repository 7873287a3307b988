"""Benchmark: how long a run takes to re-normalize after its declared ranges change.

    .venv/bin/python bench/renormalize.py [--steps 10000]

Builds the demo run (two environments, 128 samples a step) with `--steps` steps on the embedded
default (SQLite), starts the server, changes the declarations with `manage.py declare_ranges`
(another process; no page or trainer connected) and times until the server's own pipeline has
re-aggregated every step (`pending_steps` = 0 through the read API). Target ≤ 10 s for 10,000
steps. Exits non-zero when the target is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from devtools.live_server import LiveServer, ServerState, running  # noqa: E402

TARGET_S = 10.0


def get(server: LiveServer, path: str) -> dict:
    with urllib.request.urlopen(server.http + path, timeout=60) as resp:
        return json.load(resp)  # type: ignore[no-any-return]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--steps", type=int, default=10_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        state = ServerState(tmp)
        t0 = time.perf_counter()
        state.manage("demo", "--steps", str(args.steps), timeout=3600)
        built = time.perf_counter() - t0
        with running(state) as server:
            [run] = get(server, "/api/runs")["runs"]
            envs = tmp / "envs.yaml"
            envs.write_text("environments:\n"
                            "  - {name: countdown, reward_min: 0, reward_max: 4}\n"
                            "  - {name: hendrycks_math, reward_min: -1, reward_max: 1}\n")
            t0 = time.perf_counter()
            state.manage("declare_ranges", "--project", "demo", "--run", run["name"], str(envs))
            declared = time.perf_counter() - t0
            left = get(server, f"/api/runs/{run['id']}")["pending_steps"]
            while left:
                time.sleep(0.05)
                left = get(server, f"/api/runs/{run['id']}")["pending_steps"]
            took = time.perf_counter() - t0
    load = os.getloadavg()[0]
    verdict = "met" if took <= TARGET_S else "MISSED"
    print(f"demo run of {args.steps:,} steps built in {built:.1f} s; declare_ranges took "
          f"{declared:.2f} s; every step re-normalized {took:.2f} s after it started "
          f"(load {load:.1f}); target ≤ {TARGET_S:.0f} s: {verdict}")
    return 0 if took <= TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
