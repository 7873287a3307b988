"""Events benchmark, against one server process on the embedded default (SQLite + in-memory
layer), over the real WebSocket:

1. ingest: a client streams `events` messages of 4,096 events (an asynchronous GRPO job's
   spans: 2 trainer ranks' microbatches, 2 servers × 16 slots of short generations, weight syncs,
   save_batch instants; columns as trainer_hooks sends them) and
   waits for the acks: events/s and p50/p99 ack latency;
2. freshness: after the stream, a `barrier`, then the derived `timing_*` series read through
   the read API: ms from sending the barrier to reading the last step's point;
3. window read: `GET /events` of a 30-s window holding ~50,000 events (ms, median of 5).

Also printed: the server's CPU seconds for the stream (its process and its workers, from
/proc), as events per CPU-second — what one core would carry, and a figure that a loaded machine
disturbs much less than events/s — and how they split between the process (the event loop and
the ingest thread) and its pipeline worker. Before the stream the server is warmed up by a
message of 4,096 events to another run and a barrier: the worker's first pass imports the
aggregation modules (~0.25 CPU-s once per process, not per event), as bench/scaleout.py does.

Targets: ≥ 500,000 events/s per server process; derived series readable ≤ 250 ms after the
barrier; a 30-s window of 50,000 events read in ≤ 100 ms.
Run: .venv/bin/python bench/events.py [--messages 250] [--window 4] [--repeat 1]
(`--repeat N`: N servers one after another, each its own database, and the medians.)
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import websockets

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from devtools.live_server import ServerState, running  # noqa: E402
from trainer_hooks.timeline.columns import clean_events, wire_columns  # noqa: E402
from trainer_hooks.wire.events import EVENT_COLUMNS  # noqa: E402
from trainer_hooks.wire.protocol import encode_msgpack  # noqa: E402

PER_MESSAGE = 4096
RANKS, SERVERS, SLOTS, MICRO = 2, 2, 16, 8


def job(n_events: int, t0: float = 1_700_000_000.0) -> dict[str, np.ndarray | list[Any]]:
    """Events of a simulated job, in time order, about `n_events` of them: per step, every
    rank's MICRO forward/backward pairs and an optimizer step, a weight broadcast, a weight
    sync per server, a save_batch, and generations filling each slot's time."""
    rng = np.random.default_rng(0)
    per_step_trainer = RANKS * (2 * MICRO + 2) + SERVERS + 1
    gens_per_slot = 100  # dense: a 30-s window holds ~50,000 events
    per_step = per_step_trainer + SERVERS * SLOTS * gens_per_slot
    steps = max(1, n_events // per_step)
    cols: dict[str, list[Any]] = {k: [] for k in (
        "name", "start", "end", "source", "step", "rank", "server", "slot", "status",
        "tokens", "sample_id")}

    def add(name: str, start: float, end: float | None, source: str, step: int,
            rank: int | None = None, server: int | None = None, slot: int | None = None,
            status: str | None = None, tokens: int | None = None,
            sample: str | None = None) -> None:
        for k, v in (("name", name), ("start", start), ("end", end), ("source", source),
                     ("step", step), ("rank", rank), ("server", server), ("slot", slot),
                     ("status", status), ("tokens", tokens), ("sample_id", sample)):
            cols[k].append(v)

    step_len = 2.0
    for s in range(steps):
        base = t0 + s * step_len
        for r in range(RANKS):
            t = base + 0.05
            for _ in range(MICRO):
                add("train_step/forward", t, t + 0.05, "trainer", s, rank=r)
                add("train_step/backward", t + 0.05, t + 0.15, "trainer", s, rank=r)
                t += 0.15
            add("optimizer_step", t, t + 0.05, "trainer", s, rank=r)
            add("weight_broadcast", t + 0.05, t + 0.15, "trainer", s, rank=r)
        for v in range(SERVERS):
            add("weight_sync", base + 1.4, base + 1.5, "inference", s + 1, server=v)
        add("save_batch", base + 1.9, None, "orchestrator", s)
        for v in range(SERVERS):
            for k in range(SLOTS):
                edges = np.sort(rng.uniform(0, step_len, gens_per_slot - 1))
                starts = base + np.concatenate([[0.0], edges])
                ends = base + np.concatenate([edges, [step_len]])
                for g in range(gens_per_slot):
                    status = ("canceled" if rng.random() < 0.02 else
                              "discarded" if rng.random() < 0.1 else None)
                    add("generation", float(starts[g]), float(ends[g]), "inference", s,
                        server=v, slot=k, status=status, tokens=int(rng.integers(50, 900)),
                        sample=f"{s}-{v}-{k}-{g}")
    order = np.argsort(np.asarray(cols["start"]), kind="stable")
    out: dict[str, np.ndarray | list[Any]] = {}
    for key, values in cols.items():
        if key in ("start", "end"):
            arr = np.array([np.nan if x is None else x for x in values], dtype=np.float64)
            out[key] = arr[order]
        else:
            out[key] = [values[i] for i in order.tolist()]
    return out


def frames(cols: dict[str, Any], run: str) -> list[bytes]:
    """Messages of PER_MESSAGE events, their columns made as trainer_hooks makes them
    (`trainer_hooks.timeline.columns`: one value for a column that is all alike, typed arrays
    for numbers, float64 with NaN for integers with nulls), encoded as msgpack."""
    n = len(cols["name"])
    out = []
    for i, a in enumerate(range(0, n, PER_MESSAGE)):
        b = min(n, a + PER_MESSAGE)
        part = {k: (v[a:b].tolist() if isinstance(v, np.ndarray) else v[a:b])
                for k, v in cols.items()}
        part.update({k: [None] * (b - a) for k in EVENT_COLUMNS if k not in part})
        rows, wire = wire_columns(clean_events(part, b - a), "events", lists_for_nulls=False)
        assert rows == b - a
        out.append(encode_msgpack({"v": 1, "id": f"e{i}", "type": "events", "run": run,
                                   **wire}))
    return out


async def stream(url: str, token: str, data: list[bytes], window: int, run: str = "bench-events"
                 ) -> tuple[float, list[float], float]:
    """(seconds to stream and ack everything, ack latencies, ms from the barrier's send to
    its ack)."""
    headers = {"Authorization": f"Bearer {token}"}
    latencies: list[float] = []
    async with websockets.connect(url, additional_headers=headers, max_size=None) as ws:
        sent: list[float] = []
        start = time.perf_counter()
        nxt = 0
        while len(latencies) < len(data):
            while nxt < len(data) and nxt - len(latencies) < window:
                sent.append(time.perf_counter())
                await ws.send(data[nxt])
                nxt += 1
            reply = await ws.recv()
            latencies.append(time.perf_counter() - sent[len(latencies)])
            assert b'"ack"' in (reply if isinstance(reply, bytes) else reply.encode()), reply
        elapsed = time.perf_counter() - start
        t = time.perf_counter()
        await ws.send(orjson.dumps({"v": 1, "id": "barrier", "type": "barrier",
                                    "run": run}).decode())
        reply = await ws.recv()
        assert b'"ack"' in (reply if isinstance(reply, bytes) else reply.encode()), reply
        return elapsed, latencies, (time.perf_counter() - t) * 1000


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process and its children (the pipeline's workers),
    from /proc: less sensitive to a loaded machine than wall time."""
    return sum(cpu_split(pid))


def cpu_split(pid: int) -> tuple[float, float]:
    """(the process's own CPU seconds, its children's)."""
    tick = os.sysconf("SC_CLK_TCK")
    children = Path(f"/proc/{pid}/task/{pid}/children")
    kids = [int(c) for c in children.read_text().split()] if children.exists() else []
    out = []
    for group in ([pid], kids):
        total = 0.0
        for p in group:
            try:
                fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            except FileNotFoundError:
                continue
            total += (int(fields[11]) + int(fields[12])) / tick  # utime, stime
        out.append(total)
    return out[0], out[1]


def get(url: str) -> Any:
    with urllib.request.urlopen(url) as response:  # noqa: S310 - our own local server
        return orjson.loads(response.read())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=250)
    parser.add_argument("--window", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    cols = job(args.messages * PER_MESSAGE)
    data = frames(cols, "bench-events")
    warm = frames({k: v[:PER_MESSAGE] for k, v in cols.items()}, "bench-warmup")[:1]
    results = [once(cols, data, warm, args.window) for _ in range(args.repeat)]
    if args.repeat > 1:
        keys = results[0].keys()
        med = {k: float(np.median([r[k] for r in results])) for k in keys}
        print(f"medians of {args.repeat}: {med['rate']:,.0f} events/s, "
              f"{med['per_cpu']:,.0f} events per CPU-second (process {med['main']:.2f} s, "
              f"worker {med['worker']:.2f} s), barrier {med['barrier']:.0f} ms, window read "
              f"{med['window']:.0f} ms; load {med['load']:.1f}")
    print(f"targets: >= 500,000 events/s; derived series readable <= 250 ms after the "
          f"barrier; a 30-s window of 50,000 events <= 100 ms; load {os.getloadavg()[0]:.1f}")


def once(cols: dict[str, Any], data: list[bytes], warm: list[bytes], window: int
         ) -> dict[str, float]:
    """One server: warm-up, the stream, the barrier, the window reads; its figures."""
    n = len(cols["name"])
    with tempfile.TemporaryDirectory() as tmp:
        state = ServerState(Path(tmp))
        with running(state) as server:
            token = state.token("bench")
            assert server.proc is not None
            asyncio.run(stream(server.ws + "/ws/ingest/", token, warm, 1, "bench-warmup"))
            main0, worker0 = cpu_split(server.proc.pid)
            elapsed, lat, barrier_ms = asyncio.run(
                stream(server.ws + "/ws/ingest/", token, data, window))
            main1, worker1 = cpu_split(server.proc.pid)
            main_cpu, worker_cpu = main1 - main0, worker1 - worker0
            cpu = main_cpu + worker_cpu
            load = os.getloadavg()[0]
            ms = np.array(lat) * 1000
            print(f"ingest: {n / elapsed:,.0f} events/s over {len(data)} messages of "
                  f"{PER_MESSAGE} ({n:,} events); ack latency p50 {np.percentile(ms, 50):.1f} ms,"
                  f" p99 {np.percentile(ms, 99):.1f} ms; load {load:.1f}")
            print(f"server CPU: {cpu:.2f} s for {n:,} events and the barrier (its process "
                  f"{main_cpu:.2f} s, its worker {worker_cpu:.2f} s): {n / cpu:,.0f} events per "
                  "CPU-second")
            runs = get(server.http + "/api/runs?project=bench")["runs"]
            rid = next(r["id"] for r in runs if r["name"] == "bench-events")
            t = time.perf_counter()
            catalog = get(f"{server.http}/api/runs/{rid}/catalog")
            sid = next(e["id"] for e in catalog["series"]
                       if e["kind"] == "timeline" and e["key"] == "timing_step_total")
            series = get(f"{server.http}/api/runs/{rid}/series?ids={sid}")["series"][sid]
            read_ms = (time.perf_counter() - t) * 1000
            print(f"freshness: barrier acked {barrier_ms:.0f} ms after it was sent (the derived "
                  f"series of {len(series['step'])} steps recomputed from {n:,} events), "
                  f"then read in {read_ms:.0f} ms: {barrier_ms + read_ms:.0f} ms in all")
            start = float(np.nanmin(cols["start"]))
            span = float(np.nanmax(cols["end"])) - start
            per_s = n / span
            w0 = start + span / 2
            width = 50_000 / per_s
            times = []
            for _ in range(5):
                t = time.perf_counter()
                got = get(f"{server.http}/api/runs/{rid}/events?start={w0}&end={w0 + width}")
                times.append((time.perf_counter() - t) * 1000)
            print(f"window read: {len(got['events']['name']):,} events of a {width:.0f}-s "
                  f"window in {np.median(times):.0f} ms (median of 5); load "
                  f"{os.getloadavg()[0]:.1f}", flush=True)
    return {"rate": n / elapsed, "per_cpu": n / cpu, "main": main_cpu, "worker": worker_cpu,
            "barrier": barrier_ms, "window": float(np.median(times)), "load": load}


if __name__ == "__main__":
    main()
