"""Ingest benchmark: one client streams `samples` batches (1024 samples, 8 sample metrics) over
the WebSocket to one server process on the embedded default (SQLite + in-memory layer) and
waits for acks. Prints sustained samples/s and p50/p99 ack latency, with the number columns as
typed arrays (what trainer_hooks sends) and as msgpack lists.

Target (issue 30): ≥ 1,000,000 samples/s per server process with typed arrays, and p99 ack
≤ 50 ms. On a 2-core machine the server shares the cores with this client and with its own
aggregation worker process: the figure is the whole machine's, not the server's alone.
Run: .venv/bin/python bench/ingest.py [--batches 400] [--windows 1,4] [--kinds typed,lists]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

import msgpack
import numpy as np
import websockets

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from devtools.live_server import ServerState, running  # noqa: E402
from trainer_hooks.wire.protocol import encode_msgpack  # noqa: E402

BATCH, METRICS, BATCHES_PER_STEP, GROUP = 1024, 8, 8, 8


def make_frames(n_batches: int, seed: int = 0, run: str = "bench", *,
                typed: bool = True) -> list[bytes]:
    """`samples` frames; number columns as typed arrays (what trainer_hooks sends, via
    `encode_msgpack`) or, with `typed=False`, as msgpack lists (any other client)."""
    rng = np.random.default_rng(seed)
    frames = []
    for b in range(n_batches):
        step, part = divmod(b, BATCHES_PER_STEP)
        base = part * BATCH
        ids = np.arange(base, base + BATCH)
        msg = {
            "v": 1, "id": f"b{b}", "type": "samples", "run": run, "step": step,
            "env": "math", "sample_id": ids, "group_id": ids // GROUP,
            "reward": rng.integers(0, 2, BATCH).astype(float),
            "advantage": rng.normal(0, 1, BATCH),
            "prompt_tokens": rng.integers(50, 300, BATCH),
            "completion_tokens": rng.integers(10, 2000, BATCH),
            "metrics": {f"m{k}": rng.normal(k, 1, BATCH) for k in range(METRICS)},
        }
        frames.append(encode_msgpack(msg) if typed else msgpack.packb(msg, default=_as_list))
    return frames


def _as_list(value: np.ndarray) -> list:
    return value.tolist()


async def stream(url: str, token: str, frames: list[bytes], window: int) -> tuple[float, list]:
    headers = {"Authorization": f"Bearer {token}"}
    latencies: list[float] = []
    async with websockets.connect(url, additional_headers=headers, max_size=None) as ws:
        sent: list[float] = []
        start = time.perf_counter()
        nxt = 0
        while len(latencies) < len(frames):
            while nxt < len(frames) and nxt - len(latencies) < window:
                sent.append(time.perf_counter())
                await ws.send(frames[nxt])
                nxt += 1
            reply = await ws.recv()
            latencies.append(time.perf_counter() - sent[len(latencies)])
            assert b'"ack"' in (reply if isinstance(reply, bytes) else reply.encode()), reply
        return time.perf_counter() - start, latencies


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batches", type=int, default=400)
    parser.add_argument("--windows", default="1,4")
    parser.add_argument("--kinds", default="typed,lists",
                        help="which number columns: typed (arrays), lists, or both")
    args = parser.parse_args()
    kinds = args.kinds.split(",")
    if not kinds or set(kinds) - {"typed", "lists"}:
        parser.error(f"--kinds: {args.kinds!r}; expected typed, lists or typed,lists")
    with tempfile.TemporaryDirectory() as tmp:
        state = ServerState(Path(tmp))
        with running(state) as server:
            token = state.token("bench")
            url = server.ws + "/ws/ingest/"
            for typed in [k == "typed" for k in ("typed", "lists") if k in kinds]:
                for i, window in enumerate(int(w) for w in args.windows.split(",")):
                    kind = "typed arrays" if typed else "msgpack lists"
                    part = make_frames(args.batches, seed=i, typed=typed,
                                       run=f"bench-window-{window}-{typed}")
                    elapsed, lat = asyncio.run(stream(url, token, part, window))
                    ms = np.array(lat) * 1000
                    print(f"{kind}, window={window}: {len(part) * BATCH / elapsed:,.0f} "
                          f"samples/s over {len(part)} batches of {BATCH}; ack latency p50 "
                          f"{np.percentile(ms, 50):.1f} ms, p99 {np.percentile(ms, 99):.1f} ms")
    print(f"targets: >= 1,000,000 samples/s with typed arrays, p99 ack <= 50 ms; "
          f"load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
