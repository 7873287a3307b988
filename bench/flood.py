"""Benchmark: a flooding token must neither grow the server without bound nor slow another
token down (docs/operations.md "Limits").

    .venv/bin/python bench/flood.py [--seconds 20] [--connections 8] [--frame-kib 512]
                                    [--server-root DIR]

Token A floods: `--connections` WebSocket connections each pipelining samples messages of about
`--frame-kib` KiB (msgpack, ids unique) as fast as they go, never waiting for a reply,
reconnecting 0.1 s after each close; and one HTTP client posting batches of 50 step messages
back to back. Token B behaves: one
connection sends one step message every 50 ms and times each ack. Printed: B's ack latency
before the flood and during it (p50 / p99 / max; target p99 ≤ 300 ms during), the server
process's RSS before, at its peak and 5 s after the flood (the growth it left), and what A got
(frames sent, 4429 closes, HTTP 429s). `--server-root` serves another checkout (an older commit,
to compare in one run). Embedded server (SQLite, in-process layer), started first, not timed.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import msgpack
import numpy as np
import orjson
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from devtools import live_server  # noqa: E402
from devtools.live_server import ServerState, running  # noqa: E402

TARGET_P99_MS = 300.0
AFTER_SECONDS = 5.0  # the 'after' RSS is read this long after the flood stops


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def batch(prefix: str, k: int) -> bytes:
    return orjson.dumps([{"v": 1, "id": f"{prefix}-{k}-{i}", "type": "step", "run": "flood",
                          "step": k * 50 + i, "metrics": {f"m{j}": float(j) for j in range(40)}}
                         for i in range(50)])


PLACEHOLDER = b"ID-000000000000"


def samples_template(kib: int) -> bytes:
    """A samples message of about `kib` KiB whose id is PLACEHOLDER (replaced per frame)."""
    n = max(8, kib * 1024 // 18)
    return msgpack.packb({"v": 1, "id": PLACEHOLDER.decode(), "type": "samples", "run": "flood",
                          "step": 0, "sample_id": list(range(n)),
                          "group_id": [i // 8 for i in range(n)],
                          "reward": [float(i % 7) for i in range(n)]})


class Flood:
    """Token A's traffic, on threads, until `stop` is set."""

    def __init__(self, server: Any, token: str, connections: int, kib: int) -> None:
        self.server, self.token, self.stop = server, token, threading.Event()
        self.template = samples_template(kib)
        self.bytes_sent = 0
        self.sent = self.closes = self.http_429 = self.http_ok = 0
        self.threads = [threading.Thread(target=self.socket, args=(c,), daemon=True)
                        for c in range(connections)]
        self.threads.append(threading.Thread(target=self.http, daemon=True))

    def start(self) -> None:
        for t in self.threads:
            t.start()

    def socket(self, c: int) -> None:
        headers = {"Authorization": f"Bearer {self.token}"}
        k = 0
        while not self.stop.is_set():
            try:
                with connect(self.server.ws + "/ws/ingest/", additional_headers=headers,
                             max_queue=None, max_size=None) as ws:
                    while not self.stop.is_set():
                        frame = self.template.replace(PLACEHOLDER, b"ID-%02d-%09d" % (c, k))
                        ws.send(frame)
                        k += 1
                        self.sent += 1
                        self.bytes_sent += len(frame)
            except (ConnectionClosed, OSError):
                self.closes += 1
                time.sleep(0.1)

    def http(self) -> None:
        k = 0
        while not self.stop.is_set():
            req = urllib.request.Request(
                self.server.http + "/api/ingest", data=batch("h", k),
                headers={"Authorization": f"Bearer {self.token}",
                         "Content-Type": "application/json"})
            k += 1
            try:
                with urllib.request.urlopen(req, timeout=60):
                    self.http_ok += 1
            except urllib.error.HTTPError as exc:
                self.http_429 += exc.code == 429
                time.sleep(0.01)
            except OSError:
                time.sleep(0.1)


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def measure(server: Any, flood_token: str, calm_token: str, seconds: float,
            connections: int, kib: int) -> dict[str, Any]:
    assert server.proc is not None
    pid = server.proc.pid
    lat: dict[str, list[float]] = {"before": [], "during": []}
    phase = {"name": "before"}
    done = threading.Event()

    def calm() -> None:
        with connect(server.ws + "/ws/ingest/",
                     additional_headers={"Authorization": f"Bearer {calm_token}"}) as ws:
            k = 0
            while not done.is_set():
                t0 = time.perf_counter()
                ws.send(orjson.dumps({"v": 1, "id": f"b{k}", "type": "step", "run": "calm",
                                      "step": k, "metrics": {"loss": 1.0}}))
                ws.recv(timeout=120)
                lat[phase["name"]].append(1000 * (time.perf_counter() - t0))
                k += 1
                time.sleep(0.05)

    probe = threading.Thread(target=calm)
    probe.start()
    time.sleep(3.0)
    rss0, peak = rss_mib(pid), 0.0
    flood = Flood(server, flood_token, connections, kib)
    phase["name"] = "during"
    flood.start()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        peak = max(peak, rss_mib(pid))
        time.sleep(0.1)
    flood.stop.set()
    done.set()
    probe.join()
    time.sleep(AFTER_SECONDS)
    return {"lat": lat, "rss": (rss0, peak, rss_mib(pid)), "flood": flood}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--connections", type=int, default=8)
    ap.add_argument("--frame-kib", type=int, default=512)
    ap.add_argument("--server-root", type=Path, default=None)
    args = ap.parse_args()
    if args.server_root:
        live_server.ROOT = args.server_root.resolve()
    with tempfile.TemporaryDirectory() as d:
        state = ServerState(Path(d))
        with running(state) as server:
            got = measure(server, state.token("flood"), state.token("calm"), args.seconds,
                          args.connections, args.frame_kib)
    before, during = got["lat"]["before"], got["lat"]["during"]
    rss0, peak, after = got["rss"]
    flood = got["flood"]
    p99 = pct(during, 99)
    print(f"flood: {args.connections} connections pipelining + 1 HTTP client for "
          f"{args.seconds:.0f} s: {flood.sent:,} frames ({flood.bytes_sent / 2**20:,.0f} MiB) "
          f"sent, {flood.closes} closes (4429 or reset), HTTP {flood.http_ok} ok / "
          f"{flood.http_429} 429")
    print(f"calm token's acks: before p50 {pct(before, 50):.1f} ms (n={len(before)}); during "
          f"p50 {pct(during, 50):.1f}, p99 {p99:.1f}, max {max(during, default=0):.1f} ms "
          f"(n={len(during)}); target p99 ≤ {TARGET_P99_MS:.0f} ms: "
          f"{'met' if p99 <= TARGET_P99_MS else 'MISSED'}")
    print(f"server RSS: {rss0:.0f} MiB before, {peak:.0f} MiB at peak (+{peak - rss0:.0f}), "
          f"{after:.0f} MiB {AFTER_SECONDS:.0f} s after; load {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
