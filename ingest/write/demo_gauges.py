"""The demo job's system metrics (ingest.write.demo_timeline): what its GPUs, host and
inference servers would report every GAUGE_SECONDS, from how busy its events say they were.
Pure: numpy only.

- `gpu/util_pct`, `gpu/mem_used_bytes`, `gpu/power_w` per GPU of host `node-1`: GPUs 0 and 1
  are the trainer's ranks (busy while in a top-level trainer span), 2 and 3 the inference
  servers (busy while their slots generate; vLLM holds its memory share);
- `cpu/util_pct`, `host/rss_bytes` of the host; `vllm/num_requests_running` per server
  (device = the server): the slots generating at the tick.
"""

from __future__ import annotations

import numpy as np

RANKS = 2
SERVERS = 2
SLOTS = 4
HOST = "node-1"
GAUGE_SECONDS = 10.0


def _busy(start: np.ndarray, end: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Seconds of [0, t] covered by the spans (sorted by start, not overlapping)."""
    if not start.size:
        return np.zeros(t.shape)
    before = np.concatenate([[0.0], np.cumsum(end - start)])
    k = np.searchsorted(start, t, side="right")  # spans started by t
    last = np.maximum(k - 1, 0)
    partial = np.clip(t - start[last], 0.0, end[last] - start[last])
    return np.where(k > 0, before[last] + partial, 0.0)


def _covering(start: np.ndarray, end: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Whether a span (sorted, not overlapping) covers each time."""
    if not start.size:
        return np.zeros(t.shape, dtype=bool)
    k = np.searchsorted(start, t, side="right") - 1
    return (k >= 0) & (end[np.maximum(k, 0)] > t)


def _spans(ev: dict[str, np.ndarray], mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    rows = np.flatnonzero(mask)
    rows = rows[np.argsort(ev["start"][rows], kind="stable")]
    return ev["start"][rows], ev["end"][rows]


def gauges_at(ev: dict[str, np.ndarray], t: np.ndarray, seed: int) -> dict[str, np.ndarray]:
    """Every gauge at each tick of `t` (over the GAUGE_SECONDS before it), from the events
    that overlap those intervals. The noise of tick k is drawn from (seed, k) alone, so the
    values do not depend on how the job is taken."""
    k = t.size

    def share(start: np.ndarray, end: np.ndarray) -> np.ndarray:
        return (_busy(start, end, t) - _busy(start, end, t - GAUGE_SECONDS)) / GAUGE_SECONDS

    top = np.isin(ev["name"], ["train_step", "optimizer_step", "weight_broadcast"])
    generation = ev["name"] == "generation"
    busy: list[np.ndarray] = []  # per GPU: the share of the interval it worked
    for rank in range(RANKS):
        busy.append(share(*_spans(ev, top & (ev["rank"] == rank))))
    running = []
    for s in range(SERVERS):
        lanes = [_spans(ev, generation & (ev["server"] == s) & (ev["slot"] == slot))
                 for slot in range(SLOTS)]
        busy.append(np.mean([share(*lane) for lane in lanes], axis=0))
        running.append(np.sum([_covering(*lane, t) for lane in lanes], axis=0).astype(float))
    use = np.array(busy).reshape(len(busy), k)  # (gpus, k)
    gpus = use.shape[0]
    noise = _noise(seed, t, 3 * gpus + 2).reshape(k, 3 * gpus + 2).T
    util = np.clip(use * 95.0 + 1.5 * noise[:gpus], 0.0, 100.0)
    util[RANKS:] = np.clip(10.0 + 0.85 * util[RANKS:], 0.0, 100.0)  # decoding keeps it warm
    mem = np.empty_like(use)
    mem[:RANKS] = 52e9 + 18e9 * use[:RANKS] + 2e8 * noise[gpus:gpus + RANKS]
    mem[RANKS:] = 72e9 + 5e7 * noise[gpus + RANKS:2 * gpus]  # vLLM reserves its share
    power = 90.0 + 6.0 * util + 8.0 * noise[2 * gpus:3 * gpus]
    cpu = np.clip(18.0 + 14.0 * use[RANKS:].mean(axis=0) + 2.0 * noise[-2], 0.0, 100.0)
    rss = 96e9 + 1e9 * t / 3600 + 3e8 * noise[-1]  # the host's memory creeps up
    series = [("gpu/util_pct", util), ("gpu/mem_used_bytes", mem), ("gpu/power_w", power)]
    names = [name for name, _ in series for _ in range(gpus)]
    devices = list(range(gpus)) * len(series)
    values = [row for _, block in series for row in block]
    names += ["cpu/util_pct", "host/rss_bytes"] + ["vllm/num_requests_running"] * SERVERS
    devices += [-1, -1, *range(SERVERS)]
    values += [cpu, rss, *running]
    m = len(values)
    return {"time": np.tile(t, m), "name": np.repeat(np.array(names, dtype=object), k),
            "value": np.concatenate(values), "host": np.full(m * k, HOST, dtype=object),
            "device": np.repeat(np.asarray(devices, dtype=np.int64), k)}


def _noise(seed: int, t: np.ndarray, per_tick: int) -> np.ndarray:
    """Standard normal draws, `per_tick` for each tick, seeded by the tick's index."""
    ticks = np.rint(t / GAUGE_SECONDS).astype(np.int64).tolist()
    return np.concatenate([np.random.default_rng([seed, 0x6A06, tick]).standard_normal(per_tick)
                           for tick in ticks]) if ticks else np.zeros(0)
