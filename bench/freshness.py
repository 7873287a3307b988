"""Benchmark: how soon after its ack a step's aggregates are readable.

    .venv/bin/python bench/freshness.py [--steps 100] [--interval 0.1] [--samples 512]

A trainer-like client sends one `samples` message per step (`--samples` samples in groups of
16, 8 sample metrics, as typed arrays) every `--interval` seconds over the WebSocket and waits
for its ack; a reader then polls the read API (`/series`, every 5 ms) until the step's reward
mean is there. Prints the delay ack → readable (p50, p99, max) against the target (p99 ≤ 250
ms on a quiet machine) and checks every mean read equals numpy's mean of what was sent. No
barrier: this is what a page sees of a live run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

import numpy as np
from websockets.sync.client import connect as ws_connect

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from devtools.live_server import LiveServer, ServerState, running  # noqa: E402
from trainer_hooks.wire.protocol import encode_msgpack  # noqa: E402

TARGET_MS = 250.0
MEAN = "reward|reward|mean|"


def read_mean(server: LiveServer, run_id: int, step: int) -> float | None:
    query = urllib.parse.urlencode({"ids": MEAN, "min_step": step, "max_step": step})
    with urllib.request.urlopen(f"{server.http}/api/runs/{run_id}/series?{query}",
                                timeout=10) as resp:
        got = json.load(resp)["series"].get(MEAN)
    if not got or step not in got["step"]:
        return None
    return float(got["value"][got["step"].index(step)])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--interval", type=float, default=0.1)
    ap.add_argument("--samples", type=int, default=512)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    delays, wrong = [], 0
    with tempfile.TemporaryDirectory() as d:
        state = ServerState(Path(d))
        with running(state) as server:
            headers = {"Authorization": f"Bearer {state.token('bench')}"}
            with ws_connect(server.ws + "/ws/ingest/", additional_headers=headers,
                            max_size=None) as ws:
                run_id = None
                for step in range(args.steps):
                    started = time.perf_counter()
                    n = args.samples
                    reward = rng.random(n)
                    ws.send(encode_msgpack({
                        "v": 1, "id": f"m{step}", "type": "samples", "run": "fresh",
                        "step": step, "sample_id": np.arange(n), "env": "math",
                        "group_id": np.arange(n) // 16, "reward": reward,
                        "metrics": {f"m{k}": rng.random(n) for k in range(8)}}))
                    reply = json.loads(ws.recv(30))
                    acked = time.perf_counter()
                    assert reply["type"] == "ack", reply
                    if run_id is None:
                        with urllib.request.urlopen(server.http + "/api/runs") as resp:
                            run_id = json.load(resp)["runs"][0]["id"]
                    while (got := read_mean(server, run_id, step)) is None:
                        if time.perf_counter() - acked > 30:
                            raise SystemExit(f"step {step} not readable 30 s after its ack")
                        time.sleep(0.005)
                    delays.append((time.perf_counter() - acked) * 1000)
                    wrong += not np.isclose(got, reward.mean(), rtol=1e-12)
                    time.sleep(max(0.0, args.interval - (time.perf_counter() - started)))
    ms = np.array(delays)
    p99 = float(np.percentile(ms, 99))
    verdict = "met" if p99 <= TARGET_MS and not wrong else "MISSED"
    print(f"{args.steps} steps of {args.samples} samples, one every {args.interval * 1000:.0f} ms:"
          f" ack → aggregates readable p50 {np.percentile(ms, 50):.0f} ms, p99 {p99:.0f} ms, "
          f"max {ms.max():.0f} ms; {wrong} means wrong; load {os.getloadavg()[0]:.1f}; "
          f"target p99 ≤ {TARGET_MS:.0f} ms: {verdict}")
    return 0 if not wrong else 1


if __name__ == "__main__":
    sys.exit(main())
