"""Benchmark: one connection's huge backlog must not stall another's acks.

    .venv/bin/python bench/isolation.py [--steps 30000] [--per-message 500] [--samples-per-step 8]

Connection A sends a backlog spanning `--steps` steps as samples messages of `--per-message`
steps each (the protocol's cap per message), all pipelined without waiting for acks, as a
trainer reconnecting after an outage does. Meanwhile connection B (another trainer) sends one
small step message every 50 ms and times each ack. Printed: B's ack latency before A starts
(baseline) and while A's backlog is being applied, and the delay it added (p99 and worst);
target: ≤ 100 ms added. Embedded server (SQLite, in-process layer) started first, not timed.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

import msgpack
import numpy as np
import orjson
from websockets.sync.client import connect

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from devtools.live_server import ServerState, running  # noqa: E402

TARGET_MS = 100.0


def backlog(steps: int, per_message: int, per_step: int) -> list[bytes]:
    rng = np.random.default_rng(0)
    frames = []
    for first in range(0, steps, per_message):
        step = np.repeat(np.arange(first, min(steps, first + per_message)), per_step)
        n = step.size
        frames.append(msgpack.packb({
            "v": 1, "id": f"backlog-{first}", "type": "samples", "run": "backlog",
            "step": step.tolist(), "sample_id": np.arange(first * per_step,
                                                          first * per_step + n).tolist(),
            "group_id": (step * 2 + np.arange(n) % 2).tolist(),
            "reward": rng.random(n).tolist()}))
    return frames


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--steps", type=int, default=30_000)
    ap.add_argument("--per-message", type=int, default=500)
    ap.add_argument("--samples-per-step", type=int, default=8)
    args = ap.parse_args()
    frames = backlog(args.steps, args.per_message, args.samples_per_step)
    with tempfile.TemporaryDirectory() as d:
        state = ServerState(Path(d))
        with running(state) as server:
            token = state.token("bench")
            headers = {"Authorization": f"Bearer {token}"}
            phase = {"name": "baseline"}
            lat: dict[str, list[float]] = {"baseline": [], "backlog": []}
            done = threading.Event()

            def other_trainer() -> None:
                with connect(server.ws + "/ws/ingest/", additional_headers=headers) as ws:
                    k = 0
                    while not done.is_set():
                        t0 = time.perf_counter()
                        ws.send(orjson.dumps({"v": 1, "id": f"b{k}", "type": "step",
                                              "run": "other", "step": k,
                                              "metrics": {"loss": 1.0}}))
                        ws.recv(timeout=120)
                        lat[phase["name"]].append(1000 * (time.perf_counter() - t0))
                        k += 1
                        time.sleep(0.05)

            probe = threading.Thread(target=other_trainer)
            probe.start()
            time.sleep(3.0)
            with connect(server.ws + "/ws/ingest/", additional_headers=headers,
                         max_size=None) as ws:
                phase["name"] = "backlog"
                t0 = time.perf_counter()
                for frame in frames:
                    ws.send(frame)
                for _ in frames:
                    reply = orjson.loads(ws.recv(timeout=600))
                    if reply.get("type") != "ack":
                        raise SystemExit(f"backlog message refused: {reply}")
                took = time.perf_counter() - t0
            done.set()
            probe.join()
    base, busy = lat["baseline"], lat["backlog"]
    added_p99 = pct(busy, 99) - pct(base, 50)
    added_max = max(busy) - pct(base, 50)
    verdict = "met" if added_p99 <= TARGET_MS else "MISSED"
    print(f"backlog: {args.steps:,} steps in {len(frames)} messages of {args.per_message} steps "
          f"× {args.samples_per_step} samples, acked in {took:.2f} s")
    print(f"other connection's step acks: baseline p50 {pct(base, 50):.1f} ms "
          f"(n={len(base)}); during the backlog p50 {pct(busy, 50):.1f}, p99 {pct(busy, 99):.1f}, "
          f"max {max(busy):.1f} ms (n={len(busy)})")
    print(f"delay added by the backlog: p99 {added_p99:.1f} ms, worst {added_max:.1f} ms; "
          f"target ≤ {TARGET_MS:.0f} ms (p99): {verdict}; load {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
