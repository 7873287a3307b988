"""Soak benchmark: trainers and live pages for minutes, and nothing lost or counted twice.

    .venv/bin/python bench/soak.py [--seconds 180] [--trainers 16] [--subscribers 50]
                                   [--only embedded|scaleout] [--quick]

Loopback only, bounded in count and time. Two configurations, one after the other:

(a) embedded: one server process (SQLite, in-process channel layer);
(b) scaleout: two server processes on PostgreSQL (a fresh database, dropped at the end;
    `--pg`, default $TELESCOPE_SERVICE_PG or postgres://postgres@127.0.0.1:5432/postgres) and a
    PRIVATE redis-server started here on a free port (never the machine's own Redis). At half
    time that Redis is killed (SIGKILL) and restarted `--redis-down` s later on the same port.
    Trainers, subscribers and probes are spread over both processes; each subscriber watches
    runs ingested through either process, so half of what it sees crosses Redis.

Load, for `--seconds` (default 180):
- `--trainers` (16) trainer processes (multiprocessing, spawn), each a `trainer_hooks` client of
  its own run: `--rate` (4) steps/s, each step `--keys` (40) step keys of seeded random values
  (log time = the trainer's wall clock) and one `log_samples` of `--samples` (64) samples
  (reward, advantage, completion tokens, one sample metric; 8 groups of 8); a fixed number of
  steps (seconds × rate), then `close()`. Each records what it sent.
- `--subscribers` (50) live pages: asyncio `websockets` clients of `/ws/live/` in one process,
  each subscribed to `--runs-per-subscriber` (4) runs from seq 0, applying deltas in sequence
  as the browser does (a gap → one `resync`; a `reset` → reload the seq from the catalog and
  the tracked series, then subscribe again; a dropped socket → reconnect and resubscribe).
- one probe per server process: a raw `websockets` ingest connection sending one small `step`
  message every 100 ms and timing its ack (unacked messages are resent with the same id after
  a reconnect).

Figures per configuration:
- messages/s acknowledged: the trainers' `stats["acked"]` summed, over the time from the start
  of logging to the last `close()` (the client batches samples of several steps into one
  message, so this is below the 2 × trainers × rate messages offered); points/s and samples/s;
- ack latency p50/p99/max (the probes);
- live latency p50/p99/max: receive wall time minus the point's `time` (the trainer's wall
  clock at log time, same machine), for every live point of the step key `soak/g0/k00` (all
  keys of a step share its time and its delta); points of replies to subscribe / resync are
  not counted; live coverage: of the steps sent, how many each subscription received, and how
  long after the last `close()` every page had every step (they get `--drain`, 60 s, more);
- progress every 5 s: the step the trainers logged, the lowest last step stored (read API) and
  the lowest newest step a page received live — where a backlog builds up;
- CPU seconds of the server processes (and PostgreSQL backends of the benchmark's database,
  and its Redis), the trainers, the pages, and of the rest of the machine (other jobs);
- server RSS every 5 s (each server process plus its descendants, VmRSS), series and max;
- the load average (1 min) at start, mean and max during the run;
- verification: after every `close()`, every run's series read through the read API (through
  each server process): each step key has exactly the steps sent with the exact values, the
  reward count of each step equals the samples sent (and the reward mean matches), the probe
  runs hold every acknowledged probe step. Exits 1 if any point is lost or duplicated, a value
  differs, a `close()` fails, or a process crashes (live pages that miss steps are reported,
  not counted as lost: the database is the source of truth).

`--quick`: 20 s, 4 trainers, 10 subscribers.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import multiprocessing as mp
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import traceback
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import quote

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from devtools.live_server import LiveServer, ServerState  # noqa: E402
from devtools.private_redis import RedisProcess  # noqa: E402

PROJECT = "soak"
TRACKED_KEY = "soak/g0/k00"
TRACKED_SID = f"step|{quote(TRACKED_KEY, safe='')}||"
REWARD_COUNT_SID = "reward|reward|count|"
REWARD_MEAN_SID = "reward|reward|mean|"
PROBE_KEY = "probe/value"
PROBE_INTERVAL = 0.1
RSS_EVERY = 5.0
GROUP = 8


def step_keys(n: int) -> list[str]:
    return [f"soak/g{k // 10}/k{k:02d}" for k in range(n)]


# ------------------------------------------------------------------ trainers (own processes)

def trainer_main(cfg: dict[str, Any], ready: Any, go: Any, start_at: Any) -> None:
    """One training job: a fixed number of steps at a steady rate, then close(). Writes what
    it sent (and its client's stats) to cfg["out"]."""
    import numpy as np

    from trainer_hooks import connect

    out: dict[str, Any] = {"run": cfg["run"], "error": None}
    try:
        client = connect(cfg["url"], cfg["token"], cfg["run"],
                         config={"soak": True, "trainer": cfg["idx"], "seed": cfg["seed"]},
                         spool_dir=cfg["spool"])
        ready.put(cfg["idx"])
        if not go.wait(180):
            raise RuntimeError("no start signal in 180 s")
        t0 = start_at.value
        keys = step_keys(cfg["keys"])
        n, rate = cfg["samples"], cfg["rate"]
        rng = np.random.default_rng([cfg["seed"], cfg["idx"]])
        values: dict[str, list[float]] = {k: [] for k in keys}
        steps: list[int] = []
        reward_sum: list[float] = []
        behind = 0.0
        for step in range(cfg["steps"]):
            delay = t0 + step / rate - time.time()
            if delay > 0:
                time.sleep(delay)
            else:
                behind = max(behind, -delay)
            row = rng.standard_normal(len(keys)).tolist()
            metrics = dict(zip(keys, row, strict=True))
            client.log_step(step, metrics, time=time.time())
            reward = rng.random(n)
            ids = [f"{step}-{i}" for i in range(n)]
            groups = [f"{step}-g{i // GROUP}" for i in range(n)]
            client.log_samples(step, sample_id=ids, group_id=groups, reward=reward, env="soak",
                               advantage=reward - reward.mean(),
                               completion_tokens=rng.integers(10, 4000, n).astype(np.float64),
                               metrics={"correct": (reward > 0.5).astype(np.float64)})
            steps.append(step)
            for k, v in metrics.items():
                values[k].append(v)
            reward_sum.append(float(reward.sum()))
        out["logged_until"] = time.time()
        out["close_ok"] = client.close(timeout=cfg["close_timeout"], status="finished")
        out["closed_at"] = time.time()
        out["stats"] = client.stats
        out["not_stored"] = client.not_stored[:20]
        out.update(started=t0, steps=steps, values=values, reward_sum=reward_sum,
                   samples_per_step=n, max_behind_s=behind)
    except Exception:  # noqa: BLE001 - reported by the benchmark, not raised in a child
        out["error"] = traceback.format_exc()
    Path(cfg["out"]).write_text(json.dumps(out))


# ------------------------------------------------------------------ subscribers (one process)

def get_json(url: str, timeout: float = 30.0) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return json.loads(response.read())


class Sub:
    """Counters and observations of one live page."""

    def __init__(self, idx: int, http: str, ws: str, runs: list[int]) -> None:
        self.idx, self.http, self.ws, self.runs = idx, http, ws, runs
        self.latency: list[float] = []
        self.lat_at: list[float] = []
        self.received: dict[int, set[int]] = {r: set() for r in runs}
        self.repeats = 0
        self.deltas = self.gaps = self.resyncs = self.resets = 0
        self.reconnects = self.errors = 0
        self.error_texts: list[str] = []

    async def reset(self, ws: Any, run: int, last: dict[int, int],
                    replay_from: dict[int, int]) -> None:
        """What the page does on `reset`: reload the snapshot (catalog seq, series), then
        subscribe after it."""
        self.resets += 1
        cat = await asyncio.to_thread(get_json, f"{self.http}/api/runs/{run}/catalog")
        got = await asyncio.to_thread(
            get_json, f"{self.http}/api/runs/{run}/series?max_points=20000&ids="
            + quote(TRACKED_SID, safe=""))
        series = got["series"].get(TRACKED_SID)
        if series:
            self.received[run].update(series["step"])
        last[run] = replay_from[run] = cat["seq"]
        await ws.send(json.dumps({"type": "subscribe", "run": run, "after_seq": cat["seq"]}))

    async def live(self, stop: asyncio.Event) -> None:
        import orjson
        import websockets

        last = dict.fromkeys(self.runs, 0)
        backoff = 0.25
        while not stop.is_set():
            try:
                async with websockets.connect(self.ws + "/ws/live/", origin=self.http,
                                              max_size=None, open_timeout=10,
                                              close_timeout=2) as ws:
                    backoff = 0.25
                    replay_from: dict[int, int] = {}
                    resyncing: dict[int, int] = {}
                    for run in self.runs:  # a reconnect resubscribes from what was applied
                        replay_from[run] = last[run]
                        await ws.send(json.dumps({"type": "subscribe", "run": run,
                                                  "after_seq": last[run]}))
                    while not stop.is_set():
                        try:
                            raw = await asyncio.wait_for(ws.recv(), 0.5)
                        except TimeoutError:
                            continue
                        now = time.time()
                        msg = orjson.loads(raw)
                        kind, run = msg.get("type"), msg.get("run")
                        if kind == "error":
                            self.errors += 1
                            if len(self.error_texts) < 5:
                                self.error_texts.append(str(msg)[:200])
                        if run not in last:
                            continue
                        if kind == "reset":
                            await self.reset(ws, run, last, replay_from)
                        elif kind == "delta":
                            self.deltas += 1
                            if msg["from_seq"] != last[run]:
                                self.gaps += 1
                                if msg["seq"] > last[run] and resyncing.get(run) != last[run]:
                                    resyncing[run] = replay_from[run] = last[run]
                                    self.resyncs += 1
                                    await ws.send(json.dumps({"type": "resync", "run": run,
                                                              "after_seq": last[run]}))
                                continue
                            resyncing.pop(run, None)
                            replay = replay_from.get(run) == msg["from_seq"]
                            replay_from.pop(run, None)
                            last[run] = msg["seq"]
                            pts = msg["points"].get(TRACKED_SID)
                            if not pts:
                                continue
                            seen = self.received[run]
                            for step, t in zip(pts["step"], pts["time"], strict=True):
                                if step in seen:
                                    self.repeats += 1
                                seen.add(step)
                                if not replay:
                                    self.latency.append(now - t)
                                    self.lat_at.append(now)
            except Exception as exc:  # noqa: BLE001 - OSError, closed, handshake: reconnect
                if stop.is_set():
                    break
                self.reconnects += 1
                if len(self.error_texts) < 5:
                    self.error_texts.append(f"{type(exc).__name__}: {exc}"[:200])
                await asyncio.sleep(backoff)
                backoff = min(4.0, backoff * 2)

    def result(self) -> dict[str, Any]:
        return {"idx": self.idx, "latency": self.latency, "lat_at": self.lat_at,
                "received": {str(r): sorted(s) for r, s in self.received.items()},
                "repeats": self.repeats, "deltas": self.deltas, "gaps": self.gaps,
                "resyncs": self.resyncs, "resets": self.resets, "reconnects": self.reconnects,
                "errors": self.errors, "error_texts": self.error_texts}


async def subscribers_async(cfg: dict[str, Any], drain_flag: Any) -> dict[str, Any]:
    """The pages until the trainers are done (`drain_flag`), then until every subscription
    has every step sent (or `drain` s): how long live pages take to catch up."""
    subs = [Sub(i, s["http"], s["ws"], s["runs"]) for i, s in enumerate(cfg["subs"])]
    stop = asyncio.Event()
    tasks = [asyncio.create_task(s.live(stop)) for s in subs]
    timeline: list[tuple[float, int, int]] = []  # (time, deltas, lowest newest step received)
    n = cfg["steps"]

    def newest() -> int:
        return min((max(got, default=-1) for s in subs for got in s.received.values()),
                   default=-1)

    def complete() -> bool:
        return all(len(got) >= n for s in subs for got in s.received.values())

    hard = time.monotonic() + cfg["max_seconds"]
    next_tick = time.monotonic()
    caught_up: float | None = None
    drain_start: float | None = None
    while time.monotonic() < hard:
        now = time.monotonic()
        if now >= next_tick:
            next_tick += 5.0
            timeline.append((time.time(), sum(s.deltas for s in subs), newest()))
        if drain_start is None and drain_flag.is_set():
            drain_start = now
        if drain_start is not None:
            if complete():
                caught_up = now - drain_start
                break
            if now - drain_start > cfg["drain"]:
                break
        await asyncio.sleep(0.1)
    stop.set()
    await asyncio.wait(tasks, timeout=15)
    for t in tasks:
        t.cancel()
    return {"subs": [s.result() for s in subs], "timeline": timeline, "caught_up": caught_up,
            "complete": complete()}


def subscribers_main(cfg: dict[str, Any], drain_flag: Any) -> None:
    try:
        out: Any = {**asyncio.run(subscribers_async(cfg, drain_flag)), "error": None}
    except Exception:  # noqa: BLE001
        out = {"subs": [], "timeline": [], "caught_up": None, "complete": False,
               "error": traceback.format_exc()}
    Path(cfg["out"]).write_text(json.dumps(out))


class StoredProgress:
    """Every 5 s, in a thread: the lowest `last_step` over the trainers' runs (read API)."""

    def __init__(self, http: str, names: set[str]) -> None:
        self.http, self.names = http, names
        self.series: list[tuple[float, int]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.main, daemon=True)

    def main(self) -> None:
        while not self.stop.is_set():
            t = time.time()
            try:
                runs = get_json(f"{self.http}/api/runs?project={PROJECT}", timeout=20)["runs"]
                steps = [r["last_step"] for r in runs if r["name"] in self.names]
                low = min((-1 if x is None else x for x in steps), default=-1)
                self.series.append((t, low))
            except Exception:  # noqa: BLE001 - a slow server: a hole in the series
                self.series.append((t, -2))
            self.stop.wait(max(0.0, t + 5.0 - time.time()))


# ------------------------------------------------------------------ probe (a thread here)

class Probe:
    """One small step message every 100 ms on a raw ingest socket; each ack timed."""

    def __init__(self, ws: str, token: str, run: str) -> None:
        self.url, self.token, self.run = ws + "/ws/ingest/", token, run
        self.latency: list[float] = []
        self.lat_at: list[float] = []
        self.sent: dict[str, tuple[int, float]] = {}  # id -> (step, first send time)
        self.unacked: dict[str, bytes] = {}
        self.acked_steps: list[int] = []
        self.duplicate_acks = self.errors = self.reconnects = self.resent = 0
        self.error_texts: list[str] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=lambda: asyncio.run(self.main()), daemon=True)

    def message(self, step: int) -> tuple[str, bytes]:
        mid = f"probe-{step}"
        return mid, json.dumps({"v": 1, "id": mid, "type": "step", "run": self.run,
                                "step": step, "metrics": {PROBE_KEY: step * 0.25}}).encode()

    async def main(self) -> None:
        import websockets

        step = 0
        headers = {"Authorization": f"Bearer {self.token}"}
        drain_until: float | None = None
        while True:
            if self.stop.is_set() and drain_until is None:
                drain_until = time.monotonic() + 15
            if drain_until is not None and (not self.unacked or time.monotonic() > drain_until):
                return
            try:
                async with websockets.connect(self.url, additional_headers=headers,
                                              max_size=None, open_timeout=10,
                                              close_timeout=2) as ws:
                    for body in list(self.unacked.values()):  # same ids: acked once
                        self.resent += 1
                        await ws.send(body.decode())
                    receiver = asyncio.create_task(self.receive(ws))
                    try:
                        nxt = time.monotonic()
                        while not self.stop.is_set() and not receiver.done():
                            mid, body = self.message(step)
                            self.sent[mid] = (step, time.perf_counter())
                            self.unacked[mid] = body
                            await ws.send(body.decode())
                            step += 1
                            nxt += PROBE_INTERVAL
                            await asyncio.sleep(max(0.0, nxt - time.monotonic()))
                        deadline = time.monotonic() + 15
                        while (self.unacked and not receiver.done()
                               and time.monotonic() < deadline):
                            await asyncio.sleep(0.05)
                        if receiver.done() and (self.unacked or not self.stop.is_set()):
                            raise ConnectionError("the server closed the probe's socket")
                        return
                    finally:
                        receiver.cancel()
                        await asyncio.gather(receiver, return_exceptions=True)
            except Exception as exc:  # noqa: BLE001 - reconnect, resend
                self.reconnects += 1
                if len(self.error_texts) < 5:
                    self.error_texts.append(f"{type(exc).__name__}: {exc}"[:200])
                await asyncio.sleep(0.5)

    async def receive(self, ws: Any) -> None:
        async for raw in ws:
            now = time.perf_counter()
            replies = json.loads(raw)
            for r in replies if isinstance(replies, list) else [replies]:
                mid = r.get("id")
                if r.get("type") != "ack":
                    self.errors += 1
                    if len(self.error_texts) < 5:
                        self.error_texts.append(str(r)[:200])
                    continue
                if r.get("duplicate"):
                    self.duplicate_acks += 1
                if mid in self.unacked:
                    del self.unacked[mid]
                    step, t = self.sent[mid]
                    self.acked_steps.append(step)
                    self.latency.append(now - t)
                    self.lat_at.append(time.time())


# ------------------------------------------------------------------ machinery

def proc_stat(pid: int) -> tuple[int, int, int] | None:
    """(ppid, start time, CPU time used) of a process, in clock ticks; None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()
    return int(fields[1]), int(fields[19]), int(fields[11]) + int(fields[12])


class CpuMeter:
    """CPU seconds used by groups of processes, sampled (a process's last sample counts)."""

    def __init__(self) -> None:
        self.ticks: dict[str, dict[tuple[int, int], int]] = {}

    def sample(self, group: str, pids: list[int]) -> None:
        seen = self.ticks.setdefault(group, {})
        for pid in pids:
            st = proc_stat(pid)
            if st:
                seen[(pid, st[1])] = st[2]

    def seconds(self, group: str) -> float:
        return sum(self.ticks.get(group, {}).values()) / os.sysconf("SC_CLK_TCK")


def machine_cpu() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine since boot, from /proc/stat."""
    parts = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = parts[3] + parts[4]
    total = sum(parts[:8])
    hz = os.sysconf("SC_CLK_TCK")
    return (total - idle) / hz, total / hz


def pids_matching(text: str) -> list[int]:
    """Processes whose command line contains `text` (PostgreSQL backends of one database)."""
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if text.encode() in Path(f"/proc/{name}/cmdline").read_bytes():
                    out.append(int(name))
            except OSError:
                pass
    return out


def descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = proc_stat(int(name))
            if st:
                children.setdefault(st[0], []).append(int(name))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def rss_mib(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def pct(xs: list[float], q: float) -> float:
    if not xs:
        return math.nan
    ys = sorted(xs)
    return ys[min(len(ys) - 1, max(0, math.ceil(q / 100 * len(ys)) - 1))]


def ms(x: float) -> str:
    if math.isnan(x):
        return "n/a"
    return f"{x * 1000:.0f} ms" if x >= 0.1 else f"{x * 1000:.1f} ms"


# ------------------------------------------------------------------ one configuration

def verify(http: str, trainers: list[dict[str, Any]], probes: list[Probe],
           keys: list[str]) -> dict[str, Any]:
    """Read every run back through the read API and compare with what was sent."""
    runs = {r["name"]: r for r in get_json(f"{http}/api/runs?project={PROJECT}")["runs"]}
    problems: list[str] = []
    lost = dup = wrong = points = 0
    for t in trainers:
        run = runs.get(t["run"])
        if run is None:
            problems.append(f"{t['run']}: no such run")
            lost += len(t["steps"]) * (len(keys) + 1)
            continue
        catalog = get_json(f"{http}/api/runs/{run['id']}/catalog")["series"]
        step_ids = {s["key"]: s["id"] for s in catalog if s["kind"] == "step"}
        extra = set(step_ids) - set(keys)
        if extra:
            problems.append(f"{t['run']}: unexpected step keys {sorted(extra)[:5]}")
        ids = [step_ids.get(k) for k in keys] + [REWARD_COUNT_SID, REWARD_MEAN_SID]
        got: dict[str, Any] = {}
        wanted = [i for i in ids if i]
        for chunk in range(0, len(wanted), 100):
            part = ",".join(quote(i, safe="") for i in wanted[chunk:chunk + 100])
            got.update(get_json(f"{http}/api/runs/{run['id']}/series?max_points=20000"
                                f"&ids={part}")["series"])
        sent_steps = t["steps"]
        for key in keys:
            sid = step_ids.get(key)
            s = got.get(sid) if sid else None
            if s is None:
                lost += len(sent_steps)
                problems.append(f"{t['run']} {key}: series missing")
                continue
            if s.get("downsampled"):
                problems.append(f"{t['run']} {key}: downsampled")
            steps, vals = s["step"], s["value"]
            points += len(steps)
            dup += len(steps) - len(set(steps))
            lost += len(set(sent_steps) - set(steps))
            extra_steps = set(steps) - set(sent_steps)
            dup += len(extra_steps)
            stored = dict(zip(steps, vals, strict=True))
            bad = [st for st, v in zip(sent_steps, t["values"][key], strict=True)
                   if st in stored and stored[st] != v]
            wrong += len(bad)
            if bad:
                problems.append(f"{t['run']} {key}: {len(bad)} values differ, e.g. step "
                                f"{bad[0]}: sent {t['values'][key][bad[0]]!r}, "
                                f"read {stored[bad[0]]!r}")
        counts = got.get(REWARD_COUNT_SID)
        means = got.get(REWARD_MEAN_SID)
        if counts is None or means is None:
            lost += len(sent_steps) * t["samples_per_step"]
            problems.append(f"{t['run']}: reward count / mean series missing")
        else:
            n = t["samples_per_step"]
            by_step = dict(zip(counts["step"], counts["value"], strict=True))
            mean_by_step = dict(zip(means["step"], means["value"], strict=True))
            dup += len(counts["step"]) - len(set(counts["step"]))
            for st, total in zip(sent_steps, t["reward_sum"], strict=True):
                c = by_step.get(st)
                if c is None or c < n:
                    lost += n - int(c or 0)
                elif c > n:
                    dup += int(c) - n
                m = mean_by_step.get(st)
                if m is None or abs(m - total / n) > 1e-12 * max(1.0, abs(total / n)):
                    wrong += 1
            extra_steps = set(counts["step"]) - set(sent_steps)
            if extra_steps:
                dup += len(extra_steps)
                problems.append(f"{t['run']}: reward counts at unsent steps "
                                f"{sorted(extra_steps)[:5]}")
    for p in probes:
        run = runs.get(p.run)
        acked = set(p.acked_steps)
        if run is None:
            lost += len(acked)
            problems.append(f"{p.run}: no such run")
            continue
        got = get_json(f"{http}/api/runs/{run['id']}/series?max_points=20000&ids="
                       + quote(f"step|{quote(PROBE_KEY, safe='')}||", safe=""))["series"]
        s = next(iter(got.values()), {"step": [], "value": []})
        steps = s["step"]
        dup += len(steps) - len(set(steps))
        missing = acked - set(steps)
        lost += len(missing)
        sent = {st for st, _ in p.sent.values()}
        dup += len(set(steps) - sent)
        wrong += sum(1 for st, v in zip(steps, s["value"], strict=True) if v != st * 0.25)
        if missing:
            problems.append(f"{p.run}: acknowledged steps missing {sorted(missing)[:5]}")
    return {"lost": lost, "duplicated": dup, "wrong": wrong, "points_read": points,
            "problems": problems}


def run_config(name: str, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    scaleout = name == "scaleout"
    ctx = mp.get_context("spawn")
    redis: RedisProcess | None = None
    state: ServerState | None = None
    servers: list[LiveServer] = []
    children: list[Any] = []
    probes: list[Probe] = []
    seen_pids: dict[int, int] = {}
    result: dict[str, Any] = {"name": name, "failures": []}
    failures: list[str] = result["failures"]
    try:
        if scaleout:
            redis = RedisProcess(tmp)
            redis.start()
            state = ServerState(tmp, args.pg, redis.url)
            servers = [LiveServer(state).start(), LiveServer(state).start()]
        else:
            state = ServerState(tmp)
            servers = [LiveServer(state).start()]
        token = state.token(PROJECT)
        load_start = os.getloadavg()[0]
        n_steps = int(args.seconds * args.rate)
        ready, go, start_at = ctx.Queue(), ctx.Event(), ctx.Value("d", 0.0)
        trainers_cfg = []
        for i in range(args.trainers):
            srv = servers[i % len(servers)]
            cfg = {"idx": i, "url": srv.ws, "token": token, "run": f"soak-{i:02d}",
                   "seed": args.seed, "keys": args.keys, "samples": args.samples,
                   "rate": args.rate, "steps": n_steps, "close_timeout": args.close_timeout,
                   "spool": str(tmp / f"spool-{i}"), "out": str(tmp / f"trainer-{i}.json")}
            trainers_cfg.append(cfg)
            p = ctx.Process(target=trainer_main, args=(cfg, ready, go, start_at), daemon=True)
            p.start()
            children.append(p)
        t_setup = time.monotonic()
        got_ready = 0
        while got_ready < args.trainers:
            left = 180 - (time.monotonic() - t_setup)
            if left <= 0:
                raise RuntimeError(f"only {got_ready} of {args.trainers} trainers ready in 180 s")
            try:
                ready.get(timeout=min(left, 5))
                got_ready += 1
            except Exception:  # noqa: BLE001 - queue.Empty: check the children
                if any(not p.is_alive() for p in children):
                    raise RuntimeError("a trainer process died during setup") from None
        start_at.value = time.time() + 0.5
        go.set()
        t_start = start_at.value
        # The runs exist once their run.start is stored: then the pages can subscribe.
        names = {c["run"] for c in trainers_cfg}
        deadline = time.monotonic() + 60
        while True:
            runs = {r["name"]: r["id"] for r in
                    get_json(f"{servers[0].http}/api/runs?project={PROJECT}")["runs"]}
            if names <= set(runs):
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"runs not created in 60 s: {sorted(names - set(runs))}")
            time.sleep(0.2)
        run_ids = [runs[c["run"]] for c in trainers_cfg]
        subs_cfg = []
        for j in range(args.subscribers):
            srv = servers[j % len(servers)]
            k = min(args.runs_per_subscriber, len(run_ids))
            # consecutive runs alternate between the server processes: cross-process fan-out
            picked = [run_ids[(j * k + i) % len(run_ids)] for i in range(k)]
            subs_cfg.append({"http": srv.http, "ws": srv.ws, "runs": sorted(set(picked))})
        drain_subs = ctx.Event()
        sub_out = tmp / "subscribers.json"
        subs_proc = ctx.Process(target=subscribers_main, daemon=True, args=(
            {"subs": subs_cfg, "out": str(sub_out), "steps": n_steps, "drain": args.drain,
             "max_seconds": args.seconds + args.close_timeout + args.drain + 120},
            drain_subs))
        subs_proc.start()
        children.append(subs_proc)
        progress = StoredProgress(servers[0].http, names)
        progress.thread.start()
        for i, srv in enumerate(servers):
            probe = Probe(srv.ws, token, f"soak-probe-{i}")
            probe.thread.start()
            probes.append(probe)

        # Watch: RSS and load every 5 s, the Redis kill at half time, until every trainer ends.
        rss: list[list[float]] = [[] for _ in servers]
        loads: list[float] = []
        kill_at = t_start + args.seconds / 2
        redis_events: dict[str, float] = {}
        hard_end = time.monotonic() + args.seconds + args.close_timeout + 90
        trainers = children[:args.trainers]
        next_sample = next_cpu = watch_start = time.monotonic()
        cpu = CpuMeter()
        cpu_start = {"machine": machine_cpu(), "bench": os.times()}
        probes_stopped = False
        dead: set[int] = set()
        while any(p.is_alive() for p in trainers) and time.monotonic() < hard_end:
            now = time.monotonic()
            if now >= next_cpu:
                next_cpu += 1.0
                for srv in servers:
                    assert srv.proc is not None
                    cpu.sample("servers", descendants(srv.proc.pid))
                cpu.sample("trainers", [p.pid for p in trainers if p.pid])
                if subs_proc.pid:
                    cpu.sample("subscribers", [subs_proc.pid])
                if scaleout and state.dbname:
                    cpu.sample("postgres", pids_matching(state.dbname))
                if redis and redis.proc:
                    cpu.sample("redis", [redis.proc.pid])
            if now >= next_sample:
                next_sample += RSS_EVERY
                loads.append(os.getloadavg()[0])
                for i, srv in enumerate(servers):
                    assert srv.proc is not None
                    pids = descendants(srv.proc.pid)
                    for pid in pids:
                        st = proc_stat(pid)
                        if st:
                            seen_pids.setdefault(pid, st[1])
                    rss[i].append(sum(rss_mib(pid) for pid in pids))
            for i, srv in enumerate(servers):
                assert srv.proc is not None
                if srv.proc.poll() is not None and i not in dead:
                    dead.add(i)
                    failures.append(f"server {i} exited with {srv.proc.returncode}")
            if redis and "killed" not in redis_events and time.time() >= kill_at:
                redis.kill()
                redis_events["killed"] = time.time()
            if (redis and "killed" in redis_events and "restarted" not in redis_events
                    and time.time() >= redis_events["killed"] + args.redis_down):
                redis.start()
                redis_events["restarted"] = time.time()
            if not probes_stopped and time.time() >= t_start + args.seconds:
                for p in probes:
                    p.stop.set()
                probes_stopped = True
            time.sleep(0.1)
        for p in trainers:
            p.join(5)
            if p.is_alive():
                failures.append(f"trainer {p.name} still running at the time limit: killed")
                p.kill()
        for p in probes:
            p.stop.set()
        drain_subs.set()  # the pages get `--drain` s to receive every step
        subs_proc.join(args.drain + 60)
        progress.stop.set()
        if subs_proc.is_alive():
            failures.append("subscriber process did not stop: killed")
            subs_proc.kill()
        for p in probes:
            p.thread.join(30)
        load_end = os.getloadavg()[0]
        wall = time.monotonic() - watch_start
        machine = machine_cpu()
        me = os.times()
        cpu_figures = {
            "wall": wall, "cpus": os.cpu_count() or 1,
            "machine_busy": machine[0] - cpu_start["machine"][0],
            "machine_total": machine[1] - cpu_start["machine"][1],
            "servers": cpu.seconds("servers"), "trainers": cpu.seconds("trainers"),
            "subscribers": cpu.seconds("subscribers"), "postgres": cpu.seconds("postgres"),
            "redis": cpu.seconds("redis"),
            "probes": (me.user + me.system) - (cpu_start["bench"].user
                                               + cpu_start["bench"].system)}

        # Collect.
        sent: list[dict[str, Any]] = []
        for c in trainers_cfg:
            path = Path(c["out"])
            if not path.exists():
                failures.append(f"{c['run']}: the trainer wrote no result")
                continue
            t = json.loads(path.read_text())
            if t["error"]:
                failures.append(f"{c['run']}: trainer failed:\n{t['error']}")
                continue
            if not t["close_ok"]:
                failures.append(f"{c['run']}: close() returned False; stats {t['stats']}; "
                                f"not stored {t['not_stored'][:3]}")
            sent.append(t)
        subs: list[dict[str, Any]] = []
        if sub_out.exists():
            sub_data = json.loads(sub_out.read_text())
            if sub_data["error"]:
                failures.append(f"subscribers failed:\n{sub_data['error']}")
            subs = sub_data["subs"]
            result.update(live_timeline=sub_data["timeline"], caught_up=sub_data["caught_up"],
                          live_complete=sub_data["complete"])
        else:
            failures.append("the subscriber process wrote no result")

        keys = step_keys(args.keys)
        checks = [verify(srv.http, sent, probes, keys) for srv in servers]

        # Figures.
        acked = sum(t["stats"]["acked"] for t in sent)
        end = max((t["closed_at"] for t in sent), default=time.time())
        span = max(1e-9, end - t_start)
        steps_sent = sum(len(t["steps"]) for t in sent)
        live = [x for s in subs for x in s["latency"]]
        by_run_steps = {t["run"]: set(t["steps"]) for t in sent}
        id_to_name = {rid: c["run"] for rid, c in zip(run_ids, trainers_cfg, strict=True)}
        expected = received = 0
        for s in subs:
            for rid, steps in s["received"].items():
                want = by_run_steps.get(id_to_name[int(rid)], set())
                expected += len(want)
                received += len(want & set(steps))
        probe_lat = [x for p in probes for x in p.latency]
        result.update(
            seconds=args.seconds, trainers=args.trainers, subscribers=args.subscribers,
            servers=len(servers), acked=acked, msgs_per_s=acked / span, span=span,
            points_per_s=steps_sent * args.keys / span,
            samples_per_s=steps_sent * args.samples / span,
            close_s=max((t["closed_at"] - t["logged_until"] for t in sent), default=math.nan),
            behind_s=max((t["max_behind_s"] for t in sent), default=math.nan),
            reconnects=sum(t["stats"]["reconnects"] for t in sent),
            replayed=sum(t["stats"]["replayed"] for t in sent),
            ack_p50=pct(probe_lat, 50), ack_p99=pct(probe_lat, 99),
            ack_max=max(probe_lat, default=math.nan), probe_acks=len(probe_lat),
            probe_unacked=sum(len(p.unacked) for p in probes),
            probe_sent=sum(len(p.sent) for p in probes),
            probe_reconnects=sum(p.reconnects for p in probes),
            probe_errors=[e for p in probes for e in p.error_texts][:5],
            live_p50=pct(live, 50), live_p99=pct(live, 99),
            live_max=max(live, default=math.nan), live_n=len(live),
            live_over_1s=sum(1 for x in live if x > 1.0),
            coverage=received / expected if expected else math.nan,
            live_missing=expected - received,
            resyncs=sum(s["resyncs"] for s in subs), resets=sum(s["resets"] for s in subs),
            gaps=sum(s["gaps"] for s in subs), repeats=sum(s["repeats"] for s in subs),
            sub_reconnects=sum(s["reconnects"] for s in subs),
            sub_errors=sum(s["errors"] for s in subs),
            sub_error_texts=[e for s in subs for e in s["error_texts"]][:5],
            rss=rss, loads=loads, load_start=load_start, load_end=load_end,
            stored_timeline=progress.series, rate=args.rate, steps=n_steps, drain=args.drain,
            checks=checks, redis_events=redis_events, t_start=t_start,
            cpu=cpu_figures)
        if redis_events:
            k0 = redis_events["killed"]
            k1 = redis_events.get("restarted", k0) + 10
            ack_out = [x for p in probes for x, at in zip(p.latency, p.lat_at, strict=True)
                       if k0 <= at <= k1]
            live_out = [x for s in subs for x, at in zip(s["latency"], s["lat_at"], strict=True)
                        if k0 <= at <= k1]
            live_in = [x for s in subs for x, at in zip(s["latency"], s["lat_at"], strict=True)
                       if not k0 <= at <= k1]
            result.update(outage_ack_max=max(ack_out, default=math.nan),
                          outage_ack_n=len(ack_out),
                          outage_live_max=max(live_out, default=math.nan),
                          outage_live_n=len(live_out),
                          steady_live_p50=pct(live_in, 50), steady_live_p99=pct(live_in, 99))
        for i, c in enumerate(checks):
            if c["lost"] or c["duplicated"] or c["wrong"]:
                failures.append(f"read through server {i}: lost {c['lost']}, duplicated "
                                f"{c['duplicated']}, wrong {c['wrong']}: {c['problems'][:5]}")
        logs = []
        for srv in servers:
            text = srv.log.read_text(errors="replace") if srv.log.exists() else ""
            logs.append({"tracebacks": text.count("Traceback"),
                         "warnings": [ln for ln in text.splitlines()
                                      if "WARNING" in ln or "ERROR" in ln][:6]})
        result["logs"] = logs
        return result
    finally:
        for p in probes:
            p.stop.set()
        for p in children:
            if p.is_alive():
                p.kill()
                p.join(5)
        for srv in servers:
            srv.stop()
        # Children of a stopped server should be gone with it: give them 5 s, then report
        # and kill (by pid, checked against the start time seen while it was a child).
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and any(
                (st := proc_stat(pid)) and st[1] == start for pid, start in seen_pids.items()):
            time.sleep(0.2)
        for pid, start in seen_pids.items():
            st = proc_stat(pid)
            if st and st[1] == start:
                try:
                    cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
                    os.kill(pid, signal.SIGKILL)
                    result.setdefault("orphans", []).append(
                        f"{pid} ({cmd.decode(errors='replace').strip()[:120]})")
                except OSError:
                    pass
        if redis:
            redis.kill()
        if state:
            state.drop()


def progress_series(r: dict[str, Any]) -> tuple[list[str], list[str], list[str]]:
    """Three series on the same 5 s grid from the start of logging: the step the trainers
    had logged, the lowest last step stored, the lowest newest step a page had received."""
    t0, rate, n = r["t_start"], r["rate"], r["steps"]
    stored = {int((t - t0) // 5): v for t, v in r.get("stored_timeline", [])}
    live = {int((t - t0) // 5): v for t, _, v in r.get("live_timeline", [])}
    buckets = range(0, max([*stored, *live, 0]) + 1)

    def fmt(v: int | None) -> str:
        return "?" if v is None or v < -1 else str(v)

    logged = [str(min(n - 1, int(b * 5 * rate))) for b in buckets]
    return logged, [fmt(stored.get(b)) for b in buckets], [fmt(live.get(b)) for b in buckets]


def report(r: dict[str, Any]) -> None:
    label = {"embedded": "embedded (1 process, SQLite, in-process layer)",
             "scaleout": "scale-out (2 processes, PostgreSQL + Redis, Redis killed at half time)"
             }[r["name"]]
    if "checks" not in r:
        print(f"SOAK {label}: did not complete: {r['failures']}")
        return
    c = r["checks"]
    lost = max(x["lost"] for x in c)
    dup = max(x["duplicated"] for x in c)
    wrong = max(x["wrong"] for x in c)
    rss_max = max((max(s) for s in r["rss"] if s), default=math.nan)
    loads = r["loads"] or [math.nan]
    caught = r.get("caught_up")
    live_state = (f"every page complete {caught:.0f} s after the last close()"
                  if caught is not None else
                  f"live pages INCOMPLETE {r.get('drain', 0):.0f} s after the last close() "
                  f"({r['coverage'] * 100:.0f}% of steps)")
    print(f"SOAK {label}: {r['seconds']:.0f} s, {r['trainers']} trainers, "
          f"{r['subscribers']} subscribers: {r['msgs_per_s']:,.1f} messages/s acknowledged "
          f"({r['points_per_s']:,.0f} step points/s, {r['samples_per_s']:,.0f} samples/s); "
          f"ack p50 {ms(r['ack_p50'])} p99 {ms(r['ack_p99'])}; live p50 {ms(r['live_p50'])} "
          f"p99 {ms(r['live_p99'])}, {live_state}; RSS max {rss_max:.0f} MiB; lost {lost}, "
          f"duplicated {dup}, "
          f"wrong {wrong}; load {r['load_start']:.1f} at start, mean "
          f"{sum(loads) / len(loads):.1f}, max {max(loads):.1f}")
    print(f"  trainers: {r['acked']:,} messages acknowledged over {r['span']:.1f} s (start of "
          f"logging → last close()); slowest close() {r['close_s']:.1f} s after its last log "
          f"call; worst lag behind the step schedule {r['behind_s'] * 1000:.0f} ms; "
          f"reconnects {r['reconnects']}, replayed {r['replayed']}")
    print(f"  probes: {r['probe_acks']} acks of {r['probe_sent']} sent (one every "
          f"{PROBE_INTERVAL * 1000:.0f} ms, not waiting for acks), max {ms(r['ack_max'])}, "
          f"unacked at the end {r['probe_unacked']}, reconnects {r['probe_reconnects']}"
          + (f", errors {r['probe_errors']}" if r["probe_errors"] else ""))
    print(f"  live: {r['live_n']:,} points timed, max {ms(r['live_max'])}, "
          f"{r['live_over_1s']} over 1 s; coverage {r['coverage'] * 100:.2f}% "
          f"({r['live_missing']} subscription-steps missing); gaps {r['gaps']}, resyncs "
          f"{r['resyncs']}, resets {r['resets']}, repeated points {r['repeats']}, reconnects "
          f"{r['sub_reconnects']}, error replies {r['sub_errors']}"
          + (f" {r['sub_error_texts']}" if r["sub_error_texts"] else ""))
    print("  live pages after the last close(): "
          + (f"every subscription had every step {caught:.1f} s later" if caught is not None
             else f"NOT every step received within {r['drain']:.0f} s")
          + " (the coverage above counts what they had then)")
    logged, stored, live = progress_series(r)
    print("  progress every 5 s (step logged / stored, lowest over runs / received live, "
          "lowest over subscriptions): "
          + " ".join(f"{a}/{b}/{c}" for a, b, c in zip(logged, stored, live, strict=False)))
    if r["redis_events"]:
        ev = r["redis_events"]
        down = ev.get("restarted", math.nan) - ev["killed"]
        print(f"  redis: killed -9 {ev['killed'] - r['t_start']:.0f} s into the run, "
              f"restarted {down:.1f} s later; from the kill to 10 s after the restart: "
              f"{r['outage_ack_n']} probe acks (max {ms(r['outage_ack_max'])}), "
              f"{r['outage_live_n']} live points (max {ms(r['outage_live_max'])}); outside "
              f"that window live p50 {ms(r['steady_live_p50'])} p99 {ms(r['steady_live_p99'])}")
    for i, s in enumerate(r["rss"]):
        if s:
            print(f"  RSS server {i} (MiB, every {RSS_EVERY:.0f} s): "
                  f"{' '.join(f'{x:.0f}' for x in s)}; max {max(s):.0f}")
    print(f"  load (1 min, every {RSS_EVERY:.0f} s): {' '.join(f'{x:.1f}' for x in loads)}")
    u = r["cpu"]
    ours = sum(u[k] for k in ("servers", "postgres", "redis", "trainers", "subscribers",
                              "probes"))
    services = (f", PostgreSQL backends {u['postgres']:.0f}, Redis {u['redis']:.0f}"
                if r["name"] == "scaleout" else "")
    print(f"  CPU seconds over {u['wall']:.0f} s × {u['cpus']} CPUs: machine busy "
          f"{u['machine_busy']:.0f} of {u['machine_total']:.0f}; server processes "
          f"{u['servers']:.0f}{services}, trainers {u['trainers']:.0f}, subscribers "
          f"{u['subscribers']:.0f}, probes and this script {u['probes']:.0f}; the rest of the "
          f"machine (other jobs) ≈ {max(0.0, u['machine_busy'] - ours):.0f}")
    for i, x in enumerate(c):
        print(f"  verified through server {i}: {x['points_read']:,} step points read; lost "
              f"{x['lost']}, duplicated {x['duplicated']}, wrong {x['wrong']}"
              + (f"; {x['problems'][:5]}" if x["problems"] else ""))
    for i, lg in enumerate(r["logs"]):
        if lg["tracebacks"] or lg["warnings"]:
            print(f"  server {i} log: {lg['tracebacks']} tracebacks; {lg['warnings']}")
    if r.get("orphans"):
        print(f"  orphaned server children killed at the end: {r['orphans']}")
    for f in r["failures"]:
        print(f"  FAILURE: {f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--seconds", type=float, default=180.0)
    ap.add_argument("--trainers", type=int, default=16)
    ap.add_argument("--subscribers", type=int, default=50)
    ap.add_argument("--runs-per-subscriber", type=int, default=4)
    ap.add_argument("--rate", type=float, default=4.0, help="steps/s per trainer")
    ap.add_argument("--keys", type=int, default=40)
    ap.add_argument("--samples", type=int, default=64)
    ap.add_argument("--seed", type=int, default=12)
    ap.add_argument("--close-timeout", type=float, default=300.0)
    ap.add_argument("--redis-down", type=float, default=3.0)
    ap.add_argument("--drain", type=float, default=60.0,
                    help="after the last close(), how long the pages may take to catch up")
    ap.add_argument("--only", choices=("embedded", "scaleout"))
    ap.add_argument("--pg", default=os.environ.get(
        "TELESCOPE_SERVICE_PG", "postgres://postgres@127.0.0.1:5432/postgres"))
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    ap.add_argument("--quick", action="store_true", help="20 s, 4 trainers, 10 subscribers")
    args = ap.parse_args()
    if args.quick:
        args.seconds, args.trainers, args.subscribers = 20.0, 4, 10
    if shutil.which("redis-server") is None and args.only != "embedded":
        print("redis-server not found: the scale-out configuration needs it")
        return 2
    names = [args.only] if args.only else ["embedded", "scaleout"]
    print(f"soak: {args.seconds:.0f} s, {args.trainers} trainers × {args.rate:g} steps/s × "
          f"({args.keys} keys + {args.samples} samples), {args.subscribers} subscribers × "
          f"{args.runs_per_subscriber} runs; load average {os.getloadavg()[0]:.2f} on "
          f"{os.cpu_count()} CPUs", flush=True)
    failed = False
    for name in names:
        tmp = Path(tempfile.mkdtemp(prefix=f"soak-{name}-"))
        try:
            r = run_config(name, args, tmp)
        except Exception:  # noqa: BLE001 - report, then the next configuration
            r = {"name": name, "failures": [traceback.format_exc()]}
        finally:
            if args.keep:
                print(f"  kept {tmp} (server logs, trainer and subscriber results)")
            else:
                shutil.rmtree(tmp, ignore_errors=True)
        report(r)
        sys.stdout.flush()
        failed = failed or bool(r["failures"])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
