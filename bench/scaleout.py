"""Scale-out benchmark: server CPU per acknowledged message with 2 server processes vs 1, on
PostgreSQL + Redis, at the same offered load; and PostgreSQL lock waits.

    .venv/bin/python bench/scaleout.py [--rounds 3] [--trainers 6] [--rate 4] [--seconds 20]
                                       [--samples 512] [--keys 40] [--pg URL]
                                       [--kinds step,samples|step|samples] [--procs 1,2]

Each run gets a fresh PostgreSQL database (`--pg`, default $TELESCOPE_SERVICE_PG or
postgres://postgres@127.0.0.1:5432/postgres; dropped after the run) and a private redis-server
on a free port (devtools/private_redis.py), then 1 or 2 server processes (daphne, each with
its pipeline worker), each warmed up by a 4-step run of its own and a barrier (not
measured: the worker's first pass imports the aggregation modules). Runs alternate 1, 2, 1,
2, ... `--rounds` times each.

Load, the same in every run: `--trainers` raw WebSocket clients (asyncio, in this process),
trainer i on server process i mod N, each its own run, sending at a fixed `--rate` steps/s for
`--seconds`: per step one `step` message of `--keys` metrics and one `samples` message of
`--samples` samples (groups of 16, 8 sample metrics, two environments: devtools/peers_gen.py's
columns, made into the message as trainer_hooks makes it: make_chunk → build_fields →
encode_msgpack), pipelined (no waiting for acks); then one `barrier` per trainer, so the
aggregation of every step is done (and counted) before the CPU is read. The frames are built
before the clock starts.

Printed per run and as medians per configuration:
- CPU seconds per acknowledged message (step + samples; the barriers not counted) of all
  server processes and their descendants (pipeline workers, multiprocessing's resource
  tracker), utime + stime from /proc, from just before the first send to the last barrier's
  ack; the 2-process / 1-process ratio of the medians (target ≤ 1.15×). Also each
  configuration's idle CPU (3 s before the load, per process), PostgreSQL backends' CPU of
  the run's database (sampled every 0.5 s, so backends that exit are counted) and Redis's CPU,
  per message;
- PostgreSQL lock waits, sampled every 50 ms from a separate connection: backends of the
  run's database whose `wait_event_type` is 'Lock' in `pg_stat_activity`, with the relation
  and statement from `pg_locks` where not granted. Reported per 1,000 messages as distinct
  waits (a backend's statement, by pid and query_start, seen waiting at least once) and as
  sample observations (target ≈ 0), with the tables and statements that waited;
- the offered load (messages/s, samples/s), ack latency p50/p99, the load average.

Left out: live pages (no `/ws/live/` subscribers, so Redis carries the publishes but fans out
to nobody; bench/soak.py has pages), the read API, text columns, and the CPU of this process
(the clients; printed) — and a scale-out *throughput* figure: on 2 shared cores two processes
cannot show more throughput than one; what this shows is that a second process costs no
extra CPU per message, which is what lets N processes on N cores carry N times the load.
Lock waits shorter than the 50-ms sampling interval can be missed.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import psycopg
import websockets

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.soak import descendants, pids_matching, proc_stat  # noqa: E402
from devtools import peers_gen  # noqa: E402
from devtools.live_server import LiveServer, ServerState  # noqa: E402
from devtools.private_redis import RedisProcess  # noqa: E402
from trainer_hooks.transport.batching import build_fields  # noqa: E402
from trainer_hooks.transport.samples import make_chunk  # noqa: E402
from trainer_hooks.wire.protocol import encode_msgpack  # noqa: E402

TARGET_RATIO = 1.15
IDLE_SECONDS = 3.0
TICK = os.sysconf("SC_CLK_TCK")
WARMUP = peers_gen.Workload(4)


def trainer_frames(run: str, steps: int, w: peers_gen.Workload, seed: int, kinds: str
                   ) -> list[tuple[str, bytes]]:
    """Per step a `step` frame and/or a `samples` frame (`kinds`), as trainer_hooks encodes
    them, with their ids."""
    step_metrics, columns = peers_gen.generate(
        peers_gen.Workload(steps, w.keys, w.samples, w.group, w.metrics))
    out = []
    t0 = time.time()
    for step in range(steps):
        metrics = {k: v + seed for k, v in step_metrics[step].items()}
        if "step" in kinds:
            out.append((f"{run}-s{step}", encode_msgpack({
                "v": 1, "id": f"{run}-s{step}", "type": "step", "run": run, "step": step,
                "metrics": metrics, "time": t0 + step})))
        if "samples" not in kinds:
            continue
        cols = columns[step]
        problems: list[str] = []
        chunk = make_chunk(step, cols["sample_id"], cols["group_id"], cols["reward"],
                           cols["env"], cols["metrics"],
                           {"completion_tokens": cols["completion_tokens"]}, t0 + step,
                           problems)
        assert not problems, problems
        fields = build_fields([chunk]).fields
        out.append((f"{run}-b{step}", encode_msgpack({
            "v": 1, "id": f"{run}-b{step}", "type": "samples", "run": run, **fields})))
    return out


async def trainer(url: str, token: str, run: str, frames: list[tuple[str, bytes]],
                  per_step: int, rate: float, start: float) -> tuple[int, list[float], float]:
    """Send `per_step` frames per step on a fixed schedule from `start` (time.perf_counter),
    then a barrier; (acks, ack latencies in ms, the barrier's ack time)."""
    headers = {"Authorization": f"Bearer {token}"}
    sent: dict[str, float] = {}
    latencies: list[float] = []
    async with websockets.connect(url, additional_headers=headers, max_size=None) as ws:
        async def send_all() -> None:
            for k in range(0, len(frames), per_step):
                delay = start + (k // per_step) / rate - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                for mid, frame in frames[k:k + per_step]:
                    sent[mid] = time.perf_counter()
                    await ws.send(frame)

        sender = asyncio.create_task(send_all())
        acked = 0
        while acked < len(frames):
            reply = orjson.loads(await ws.recv())
            if reply.get("type") != "ack":
                raise SystemExit(f"{run}: not acknowledged: {reply}")
            latencies.append(1000 * (time.perf_counter() - sent[reply["id"]]))
            acked += 1
        await sender
        await ws.send(orjson.dumps({"v": 1, "id": f"{run}-barrier", "type": "barrier",
                                    "run": run}).decode())
        reply = orjson.loads(await ws.recv())
        if reply.get("type") != "ack":
            raise SystemExit(f"{run}: barrier not acknowledged: {reply}")
        return acked, latencies, time.perf_counter()


def ticks(pids: list[int]) -> dict[tuple[int, int], int]:
    """CPU ticks used so far by each process, keyed by (pid, start time)."""
    out = {}
    for pid in pids:
        st = proc_stat(pid)
        if st:
            out[(pid, st[1])] = st[2]
    return out


def used(before: dict[tuple[int, int], int], after: dict[tuple[int, int], int]) -> float:
    """CPU seconds used between two `ticks` (a process that started in between counts whole)."""
    return sum(v - before.get(k, 0) for k, v in after.items()) / TICK


def server_ticks(servers: list[LiveServer]) -> dict[tuple[int, int], int]:
    return ticks([p for s in servers if s.proc for p in descendants(s.proc.pid)])


class PgSampler(threading.Thread):
    """Every 50 ms: backends of the database waiting on a lock (what they wait for and on);
    every 0.5 s: the CPU ticks of its backends (the last sample of each counts)."""

    LOCKS = """
        SELECT a.pid, a.query_start, left(regexp_replace(a.query, '\\s+', ' ', 'g'), 120),
               coalesce(l.relation::regclass::text, l.locktype), l.mode
        FROM pg_stat_activity a
        LEFT JOIN pg_locks l ON l.pid = a.pid AND NOT l.granted
        WHERE a.datname = current_database() AND a.wait_event_type = 'Lock'
          AND a.pid <> pg_backend_pid()"""

    def __init__(self, url: str, dbname: str) -> None:
        super().__init__(daemon=True)
        self.conn = psycopg.connect(url, autocommit=True)
        self.own = self.conn.execute("SELECT pg_backend_pid()").fetchone()[0]  # type: ignore
        self.dbname = dbname
        self.stop = threading.Event()
        self.samples = 0
        self.observed = 0
        self.waits: set[tuple[int, Any]] = set()
        self.what: Counter[str] = Counter()
        self.cpu: dict[tuple[int, int], int] = {}
        self.start_cpu: dict[tuple[int, int], int] = {}

    def backends(self) -> dict[tuple[int, int], int]:
        return ticks([p for p in pids_matching(self.dbname) if p != self.own])

    def begin(self) -> None:
        self.start_cpu = self.backends()
        self.cpu = dict(self.start_cpu)
        self.start()

    def run(self) -> None:
        next_cpu = 0.0
        while not self.stop.is_set():
            rows = self.conn.execute(self.LOCKS).fetchall()
            self.samples += 1
            for pid, qstart, query, target, mode in rows:
                self.observed += 1
                if (pid, qstart) not in self.waits:
                    self.waits.add((pid, qstart))
                    self.what[f"{target} {mode}: {query}"] += 1
            if time.monotonic() >= next_cpu:
                self.cpu.update(self.backends())
                next_cpu = time.monotonic() + 0.5
            self.stop.wait(0.05)

    def finish(self) -> float:
        """Stop; the backends' CPU seconds since `begin`."""
        self.stop.set()
        self.join()
        self.cpu.update(self.backends())
        self.conn.close()
        return used(self.start_cpu, self.cpu)


def one_run(n_proc: int, args: argparse.Namespace, tmp: Path,
            frames: dict[str, list[tuple[str, bytes]]]) -> dict[str, Any]:
    load0 = os.getloadavg()[0]
    redis = RedisProcess(tmp)
    redis.start()
    state = ServerState(tmp, args.pg, redis.url)
    servers: list[LiveServer] = []
    per_step = len(args.kinds.split(","))
    try:
        servers = [LiveServer(state).start() for _ in range(n_proc)]
        token = state.token("bench")
        # Warm-up: a few steps of each kind and a barrier through every process, so its
        # worker has started and imported what a pass needs (its first pass imports the
        # aggregation modules: ~0.5 CPU-s, once per process, not per message).
        warm = {f"warmup-{k}": trainer_frames(f"warmup-{k}", 4, WARMUP, k, "step,samples")
                for k in range(n_proc)}

        async def warm_up() -> None:
            await asyncio.gather(*(trainer(servers[k].ws + "/ws/ingest/", token, run, fr, 2,
                                           100.0, time.perf_counter())
                                   for k, (run, fr) in enumerate(warm.items())))

        asyncio.run(warm_up())
        time.sleep(1.0)
        idle0 = server_ticks(servers)
        time.sleep(IDLE_SECONDS)
        idle = used(idle0, server_ticks(servers)) / IDLE_SECONDS / n_proc
        assert redis.proc and state.dbname
        sampler = PgSampler(state.env["DATABASE_URL"], state.dbname)
        redis0 = ticks([redis.proc.pid])
        cpu0 = server_ticks(servers)
        own0 = time.process_time()
        sampler.begin()
        start = time.perf_counter() + 0.2

        async def all_trainers() -> list[tuple[int, list[float], float]]:
            return await asyncio.gather(*(
                trainer(servers[i % n_proc].ws + "/ws/ingest/", token, run, fr, per_step,
                        args.rate, start) for i, (run, fr) in enumerate(frames.items())))

        results = asyncio.run(all_trainers())
        cpu1 = server_ticks(servers)
        cpu = used(cpu0, cpu1)
        mains = {s.proc.pid for s in servers if s.proc}
        workers = used({k: v for k, v in cpu0.items() if k[0] not in mains},
                       {k: v for k, v in cpu1.items() if k[0] not in mains})
        pg_cpu = sampler.finish()
        redis_cpu = used(redis0, ticks([redis.proc.pid]))
        own = time.process_time() - own0
        wall = max(r[2] for r in results) - start
    finally:
        for s in servers:
            s.stop()
        redis.kill()
        state.drop()
    acked = sum(r[0] for r in results)
    lat = [x for r in results for x in r[1]]
    return {"procs": n_proc, "acked": acked, "cpu": cpu, "per_msg_ms": 1000 * cpu / acked,
            "workers_ms": 1000 * workers / acked,
            "idle": idle, "pg_ms": 1000 * pg_cpu / acked, "redis_ms": 1000 * redis_cpu / acked,
            "own": own, "wall": wall, "p50": float(np.percentile(lat, 50)),
            "p99": float(np.percentile(lat, 99)), "samples": sampler.samples,
            "observed": sampler.observed, "waits": len(sampler.waits), "what": sampler.what,
            "load": (load0 + os.getloadavg()[0]) / 2}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--trainers", type=int, default=6)
    ap.add_argument("--rate", type=float, default=4.0, help="steps/s per trainer")
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--samples", type=int, default=512)
    ap.add_argument("--keys", type=int, default=40)
    ap.add_argument("--procs", type=lambda v: [int(x) for x in v.split(",")], default=[1, 2],
                    help="the configurations, alternated (default 1,2)")
    ap.add_argument("--kinds", default="step,samples", choices=("step,samples", "step",
                                                                 "samples"),
                    help="the messages of a step")
    ap.add_argument("--pg", default=os.environ.get(
        "TELESCOPE_SERVICE_PG", "postgres://postgres@127.0.0.1:5432/postgres"))
    args = ap.parse_args()
    steps = int(args.seconds * args.rate)
    w = peers_gen.Workload(steps, args.keys, args.samples)
    frames = {f"scale-{i:02d}": trainer_frames(f"scale-{i:02d}", steps, w, i, args.kinds)
              for i in range(args.trainers)}
    per_step = len(args.kinds.split(","))
    offered = per_step * args.trainers * args.rate
    print(f"offered load: {args.trainers} trainers × {args.rate:g} steps/s for "
          f"{args.seconds:g} s = {offered:g} messages/s ({args.kinds}: a step of {args.keys} "
          f"keys, samples of {args.samples}), "
          f"{len(frames) * len(next(iter(frames.values()))):,} messages a run", flush=True)
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as d:
        for i in range(args.rounds):
            for n_proc in args.procs:
                tmp = Path(d) / f"run-{i}-{n_proc}"
                tmp.mkdir()
                r = one_run(n_proc, args, tmp, frames)
                runs.append(r)
                print(f"  {n_proc} process{'es' if n_proc > 1 else ''}: {r['cpu']:.2f} server "
                      f"CPU-s for {r['acked']:,} messages = {r['per_msg_ms']:.3f} ms/message "
                      f"(pipeline workers {r['workers_ms']:.3f}; idle {1000 * r['idle']:.0f} "
                      f"ms/s per process; PostgreSQL backends "
                      f"{r['pg_ms']:.3f}, Redis {r['redis_ms']:.3f} ms/message); ack p50 "
                      f"{r['p50']:.1f} ms, p99 {r['p99']:.1f} ms; done in {r['wall']:.1f} s; "
                      f"lock waits {r['waits']} ({r['observed']} observations in "
                      f"{r['samples']} samples); clients {r['own']:.1f} CPU-s; "
                      f"load {r['load']:.1f}", flush=True)
    by = {n: [r for r in runs if r["procs"] == n] for n in args.procs}
    if len(by) < 2:
        return 0
    med = {n: statistics.median(r["per_msg_ms"] for r in rs) for n, rs in by.items()}
    ratio = med[2] / med[1]
    for n, rs in by.items():
        msgs = sum(r["acked"] for r in rs)
        waits = sum(r["waits"] for r in rs)
        observed = sum(r["observed"] for r in rs)
        print(f"{n} process{'es' if n > 1 else ''}: median {med[n]:.3f} server CPU-ms per "
              f"message ({1000 / med[n]:,.0f} messages per CPU-second; PostgreSQL "
              f"{statistics.median(r['pg_ms'] for r in rs):.3f}, Redis "
              f"{statistics.median(r['redis_ms'] for r in rs):.3f} ms/message); lock waits "
              f"{1000 * waits / msgs:.2f} per 1,000 messages ({1000 * observed / msgs:.2f} "
              f"observations)")
        for what, count in sum((r["what"] for r in rs), Counter()).most_common(5):
            print(f"    waited {count}×: {what}")
    loads = [r["load"] for r in runs]
    verdict = "met" if ratio <= TARGET_RATIO else "MISSED"
    print(f"ratio 2 / 1 processes: {ratio:.3f}× (target ≤ {TARGET_RATIO}×): {verdict}; "
          f"lock waits target ≈ 0; load {min(loads):.1f}–{max(loads):.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
