"""Timeline benchmark: the "where the time goes" math and the event blob codec on a synthetic
hour of a run (ingest.core.timeline, ingest.core.eventstore), in process, no server.

    .venv/bin/python bench/timeline.py [--repeat 5]

The run: 2 ranks × 500 steps of 250 forward/backward microbatches, an optimizer step and a
weight broadcast each; an inference weight sync per server and a save_batch per step; 2
servers × 4 slots of back-to-back generations (every status, tokens, integer sample and group
ids) and compute_reward spans, 1,000,000 events over 3,600 s. Figures (medians):
`step_series` over the whole run, `decode_events` of 250 blobs of 4,096 events, `window` of a
30-s window out of 50,000 events (and `to_columns` of it), `buckets` of 60 s over the hour.
Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from ingest.core import eventstore as es  # noqa: E402
from ingest.core import timeline as tl  # noqa: E402
from trainer_hooks.wire.schema import Events, Labels  # noqa: E402

T0 = 1.7e9
STEPS, RANKS, MICROBATCHES, STEP_S = 500, 2, 250, 7.2
SERVERS, SLOTS = 2, 4
NAMES = ["forward", "backward", "optimizer_step", "weight_broadcast", "weight_sync",
         "save_batch", "generation", "compute_reward", "training_loop_start"]
SOURCES = ["trainer", "inference", "orchestrator", "reward"]


def run_events(total: int, seed: int = 0) -> tl.EventTable:
    """The synthetic run, `total` events, built with numpy (columns, no rows)."""
    rng = np.random.default_rng(seed)
    cols: dict[str, list[np.ndarray]] = {k: [] for k in (
        "name", "source", "start", "end", "step", "rank", "server", "slot", "status", "tokens",
        "sample")}

    def add(n: int, name: Any, source: int, start: np.ndarray, end: np.ndarray, *,
            step: Any = -1, rank: Any = -1, server: Any = -1, slot: Any = -1,
            status: Any = -1, tokens: Any = -1, sample: Any = -1) -> None:
        for key, value in (("name", name), ("source", source), ("start", start), ("end", end),
                           ("step", step), ("rank", rank), ("server", server), ("slot", slot),
                           ("status", status), ("tokens", tokens), ("sample", sample)):
            cols[key].append(np.broadcast_to(np.asarray(value), (n,)))

    step_t0 = T0 + STEP_S * np.arange(STEPS)
    # trainer: microbatches back to back from 0.2 s into the step, per rank
    for rank in range(RANKS):
        d = rng.uniform(0.004, 0.011, (STEPS, 2 * MICROBATCHES))
        ends = step_t0[:, None] + 0.2 + np.cumsum(d, axis=1)
        starts = ends - d
        kinds = np.tile([0, 1], MICROBATCHES)
        n = STEPS * 2 * MICROBATCHES
        add(n, np.broadcast_to(kinds, (STEPS, kinds.size)).ravel(), 0, starts.ravel(),
            ends.ravel(), step=np.repeat(np.arange(STEPS), 2 * MICROBATCHES), rank=rank)
        last = ends[:, -1]
        add(STEPS, 2, 0, last, last + 0.3, step=np.arange(STEPS), rank=rank)
        add(STEPS, 3, 0, last + 0.3, last + 0.6, step=np.arange(STEPS), rank=rank)
    for server in range(SERVERS):
        a = step_t0 + 6.2 + rng.uniform(0, 0.1, STEPS)
        add(STEPS, 4, 1, a, a + 0.4, step=np.arange(STEPS), server=server)
    add(STEPS, 5, 2, step_t0 + 6.9, np.full(STEPS, np.nan), step=np.arange(STEPS))
    add(1, 8, 2, np.array([T0 - 1.0]), np.array([np.nan]))
    used = sum(c.size for c in cols["name"])
    rewards = (total - used) // 10
    gens = total - used - rewards
    lanes = SERVERS * SLOTS
    per_lane = -(-gens // lanes)
    d = rng.exponential(3600.0 / per_lane, (lanes, per_lane))
    ends = T0 + np.cumsum(d, axis=1)
    lane = np.repeat(np.arange(lanes), per_lane)
    sample = np.arange(lanes * per_lane)
    add(gens, 6, 1, (ends - d * 0.95).ravel()[:gens], ends.ravel()[:gens],
        server=(lane // SLOTS)[:gens], slot=(lane % SLOTS)[:gens],
        status=rng.choice([-1, 0, 0, 0, 1, 2, 3], gens), tokens=rng.integers(1, 2048, gens),
        sample=sample[:gens])
    r0 = rng.uniform(T0, T0 + 3600, rewards)
    add(rewards, 7, 3, r0, r0 + rng.exponential(0.05, rewards),
        status=rng.choice([-1, 0, 1, 2], rewards))
    c = {k: np.concatenate(v) for k, v in cols.items()}
    order = np.argsort(c["start"], kind="stable")  # as senders flush: by time
    c = {k: v[order] for k, v in c.items()}
    sample_code = c["sample"]
    return tl.EventTable(
        names=list(NAMES), name=c["name"].astype(np.int32), sources=list(SOURCES),
        source=c["source"].astype(np.int32), start=c["start"].astype(np.float64),
        end=c["end"].astype(np.float64), step=c["step"].astype(np.int64),
        rank=c["rank"].astype(np.int64), servers=[f"vllm-{i}" for i in range(SERVERS)],
        server=c["server"].astype(np.int32), slot=c["slot"].astype(np.int64),
        status=c["status"].astype(np.int8), tokens=c["tokens"].astype(np.int64),
        sample_ids=sample.tolist(), sample_id=sample_code.astype(np.int32),
        group_ids=(sample // 8).tolist(),
        group_id=np.where(sample_code < 0, -1, sample_code // 8).astype(np.int32))


def used_labels(values: list[Any], codes: np.ndarray) -> Labels:
    """The labels a slice of rows uses, as a validated message carries them."""
    present, local = np.unique(codes, return_inverse=True)
    null = present < 0
    remap = np.where(null, -1, np.cumsum(~null) - 1)
    return Labels([values[int(p)] for p in present[~null]], remap[local].astype(np.int32))


def messages(ev: tl.EventTable, size: int) -> list[Events]:
    out = []
    for i, lo in enumerate(range(0, ev.n, size)):
        rows = slice(lo, lo + size)
        assert ev.sample_id is not None and ev.group_id is not None
        out.append(Events(
            id=str(i), type="events", run="bench", n=int(ev.start[rows].size),
            name=used_labels(ev.names, ev.name[rows]), start=ev.start[rows], end=ev.end[rows],
            source=used_labels(ev.sources, ev.source[rows]), step=ev.step[rows],
            rank=ev.rank[rows], server=used_labels(ev.servers, ev.server[rows]),
            slot=ev.slot[rows], status=ev.status[rows], tokens=ev.tokens[rows],
            sample_id=used_labels(ev.sample_ids, ev.sample_id[rows]),
            group_id=used_labels(ev.group_ids, ev.group_id[rows])))
    return out


def timed(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    """(median ms, last result)."""
    out, result = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        result = fn()
        out.append((time.perf_counter() - t) * 1000)
    return statistics.median(out), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    ev = run_events(args.events)
    print(f"run: {ev.n:,} events over {np.nanmax(ev.end) - ev.start.min():,.0f} s, "
          f"{STEPS} steps, {RANKS} ranks, {SERVERS * SLOTS} lanes")

    ms, st = timed(lambda: tl.step_series(ev), args.repeat)
    print(f"step_series: median {ms:.0f} ms ({st.steps.size} steps × {len(st.keys)} series)")

    msgs = messages(run_events(250 * 4096, seed=1), 4096)
    ms_enc, blobs = timed(lambda: [es.encode_events(m) for m in msgs], args.repeat)
    size = sum(len(b) for b in blobs)
    print(f"encode_events: median {ms_enc / len(msgs) * 1000:.0f} µs per message of 4,096 "
          f"events ({size / len(blobs) / 4096:.1f} bytes per event stored)")
    ms, table = timed(lambda: es.decode_events(blobs), args.repeat)
    print(f"decode_events: median {ms:.0f} ms ({len(blobs)} blobs, {table.n:,} events, "
          f"{len(table.sample_ids):,} distinct sample ids)")

    lo = ev.start[ev.n // 2]
    part = es.take(ev, np.arange(ev.n // 2 - 25_000, ev.n // 2 + 25_000))
    ms, got = timed(lambda: es.window(part, lo, lo + 30.0), args.repeat)
    ms_cols, _ = timed(lambda: es.to_columns(got), args.repeat)
    span = part.start[-1] - part.start[0]
    print(f"window: median {ms:.2f} ms (30 s out of {part.n:,} events over {span:.0f} s: "
          f"{got.n:,} events); to_columns of them: median {ms_cols:.1f} ms")

    t0 = T0
    lanes = tl.inference_lanes(ev)
    servers, ranks = tl.distinct_servers(ev), tl.distinct_ranks(ev)
    ms, b = timed(lambda: tl.buckets(ev, 60.0, t0, t0 + 3600.0, lanes=lanes, servers=servers,
                                     ranks=ranks, latest=float(np.nanmax(ev.end))),
                  args.repeat)
    print(f"buckets: median {ms:.0f} ms ({b.time.size} buckets of 60 s over the hour, from "
          f"{ev.n:,} events)")


if __name__ == "__main__":
    main()
