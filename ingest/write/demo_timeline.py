"""Where the demo's time goes: a seeded simulation of an asynchronous GRPO job's events and
gauges (PROTOCOL `events`, `gauges`), for the demo run (ingest.write.demo) and the live demo
(telescope_ui.live_demo). Pure: numpy only; times are seconds from the training loop's start.

The job, one host `node-1` with 4 GPUs:

- Trainer: 2 ranks (GPUs 0, 1). Step i starts once batch i is saved and step i−1 is done; each
  rank runs `train_step` with `MICROBATCHES` nested `train_step/forward` and
  `train_step/backward` spans, then both run `optimizer_step` (from when the slower rank is
  done: rank 1 is now and then a straggler) and `weight_broadcast` of policy step i.
- Inference: 2 servers (GPUs 2, 3) × 4 slots, each slot one sequence at a time, taking the
  orchestrator's queue in order: batch i's generations (a group's 8 samples together, an eval
  set now and then) after batch i−1's. Policy step p is the weights trainer step p made; a
  generation's `step` is the policy step it used (null: the initial weights). A server that
  has finished batch i before step i−1's weights arrive waits for them: batch i is made by
  policy step i−2 or i−1, at most one step behind the weights trainer step i starts from
  (i−1): off-policy by one.
- Weight sync: when step i's broadcast starts, each server stops starting generations; a
  generation in flight then either finishes (the slot's `weight_sync` starts after it) or, when
  much of it is left, is canceled and queued again; the sync (one `weight_sync` span per slot,
  step i, source `inference`) ends after the broadcast and the load.
- Rewards: one reward worker scores each finished generation in turn (`compute_reward`, source
  `reward`, step = the batch's step); batch i is saved (`save_batch` instant, source
  `orchestrator`) once its last reward is in. One `training_loop_start` instant at 0.
- Gauges every `GAUGE_SECONDS`: `gpu/util_pct`, `gpu/mem_used_bytes`, `gpu/power_w` per GPU
  (from how busy its rank or server was over the interval), `cpu/util_pct` and
  `host/rss_bytes` of the host, `vllm/num_requests_running` per server (device = the server).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ingest.write.demo_gauges import GAUGE_SECONDS, RANKS, SERVERS, SLOTS, gauges_at

MICROBATCHES = 4

# Inference: a generation takes PREFILL + tokens / DECODE_RATE seconds (± a few %).
PREFILL = 0.04
DECODE_RATE = 560.0  # tokens per second per slot
SLOT_GAP = 0.01  # scheduling gap between two generations on a slot
CANCEL_LEFT = 0.5  # a generation in flight at a weight sync with more left may be canceled,
CANCEL_P = 0.25  # with this probability (else it finishes before the sync starts)
LOAD = 0.3  # seconds a server takes to load broadcast weights after receiving them
EVAL_EVERY = 25  # steps between eval sets
EVAL_SIZE = 8
# Trainer: per microbatch forward and backward seconds at the mean batch size.
FORWARD, BACKWARD = 1.2, 2.5
OPTIMIZER, BROADCAST = 0.5, 1.2
STRAGGLE_P, STRAGGLE = 0.15, 1.25  # how often rank 1 is slower, and by how much
COMPILE = 5.0  # the first forward compiles
DATA = 0.1  # seconds from a saved batch to the trainer's first forward
PACK = 0.05  # seconds from a batch's last reward to its save
MEAN_TOKENS = 537.0  # the demo's mean completion tokens (uniform 50..1023)
STEP_SECONDS = 18.0  # about the job's mean step (what these settings make it)


@dataclass(frozen=True)
class Batch:
    """The samples trainer step i learns from, in the order the demo logs them."""

    sample_id: list[str]
    group_id: list[str]
    tokens: np.ndarray  # int64: completion tokens
    discarded: np.ndarray  # bool: the sample is logged with a discard reason
    reward_seconds: np.ndarray  # float64: what scoring it takes


@dataclass
class Chunk:
    """Events and gauge points of the job, columnar. Events: `name`, `source`, `status`,
    `sample_id`, `group_id` object arrays (str or None); `start`, `end` float64 (end NaN: an
    instant); `step`, `rank`, `server`, `slot`, `tokens` int64 (-1: null). Gauges: `time`,
    `value` float64, `name`, `host` object, `device` int64 (-1: null)."""

    events: dict[str, np.ndarray]
    gauges: dict[str, np.ndarray]

    @property
    def latest(self) -> float:
        """The time of its latest event (an instant's time, a span's end)."""
        return float(np.fmax(self.events["end"], self.events["start"]).max(initial=0.0))

    def event_columns(self, t0: float = 0.0, scale: float = 1.0) -> dict[str, list[Any]]:
        """The events as wire columns, at times t0 + scale · t."""
        ev = self.events
        out: dict[str, list[Any]] = {k: ev[k].tolist() for k in
                                     ("name", "source", "status", "sample_id", "group_id")}
        out["start"] = np.round(t0 + scale * ev["start"], 6).tolist()
        out["end"] = _nulls(np.round(t0 + scale * ev["end"], 6), np.isnan(ev["end"]))
        for k in ("step", "rank", "server", "slot", "tokens"):
            out[k] = _nulls(ev[k], ev[k] < 0)
        return out

    def gauge_columns(self, t0: float = 0.0, scale: float = 1.0) -> dict[str, list[Any]]:
        """The gauge points as wire columns, at times t0 + scale · t."""
        g = self.gauges
        return {"time": np.round(t0 + scale * g["time"], 6).tolist(),
                "name": g["name"].tolist(), "value": g["value"].tolist(),
                "host": g["host"].tolist(), "device": _nulls(g["device"], g["device"] < 0)}


def _nulls(values: np.ndarray, null: np.ndarray) -> list[Any]:
    out = np.array(values.tolist(), dtype=object)
    out[null] = None
    return list(out.tolist())


def split_rows(columns: dict[str, list[Any]], most: int) -> list[dict[str, list[Any]]]:
    """Columns cut into pieces of at most `most` rows (a message's limit); none when empty."""
    n = len(next(iter(columns.values())))
    return [{k: v[a:a + most] for k, v in columns.items()} for a in range(0, n, most)]


def simulate(batches: Sequence[Batch], seed: int = 0) -> tuple[AsyncJob, Chunk]:
    """The whole job that trains on `batches` (one per step), and all it did."""
    job = AsyncJob(seed)
    for i, batch in enumerate(batches):
        job.advance(i, batch)
    job.finish()
    return job, job.take(np.inf)


_COLUMNS = ("name", "start", "end", "source", "step", "rank", "server", "slot", "status",
            "tokens", "sample_id", "group_id")
_FLOATS, _INTS = ("start", "end"), ("step", "rank", "server", "slot", "tokens")


class AsyncJob:
    """The job, simulated a step at a time (`advance`); `take(t)` hands over what it finished
    by simulated time t and forgets it, so a job of any length holds only its recent past.

    Once step i+1 has been advanced (or the job finished), everything that starts before step
    i's end is known: step i+1's batch is generated alongside trainer step i, and batch i+2
    waits for step i's weights."""

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed
        self.rng = np.random.default_rng([seed, 0x7E1E])
        self.free = (0.5 + self.rng.uniform(0, 0.2, SERVERS * SLOTS)).tolist()  # warm-up
        self.policy = [-1] * SERVERS  # the policy step each server holds (-1: initial)
        self.pending: tuple[int, float, float] | None = None  # (step, broadcast start, end)
        self.synced = [True] * SERVERS
        self.reward_free = 0.0
        self.trainer_end = 0.0
        self.step_end: list[float] = []
        self.off_policy: list[np.ndarray] = []  # per step, per sample: steps behind i−1
        self.measured: list[dict[str, float]] = []  # per step: rank 0's own `timing_*`
        self.rows: list[tuple[Any, ...]] = []
        self.kept = _empty()  # events taken but still needed for the next gauges, or not yet
        self.taken = -np.inf  # events done by this time were handed over
        self.next_tick = GAUGE_SECONDS
        self.instant("training_loop_start", 0.0, "orchestrator", -1)

    def advance(self, i: int, batch: Batch) -> None:
        """Step i: its batch generated, scored and saved, then trained on."""
        done = self.generate(i, batch)
        saved = self.score(i, batch, done) + PACK
        self.instant("save_batch", saved, "orchestrator", i)
        self.train(i, saved, float(batch.tokens.mean()))

    def finish(self) -> None:
        """The last step's weights reach the servers too."""
        if self.pending is not None:
            self.synced = [False] * SERVERS
            for s in range(SERVERS):
                self.sync(s)
            self.pending = None

    def take(self, until: float) -> Chunk:
        """The events done in (the last `take`'s time, `until`] (a span at its end, an instant
        at its time), in that order, and the gauges of the ticks in that interval (`until`
        infinite: everything, up to the job's last event)."""
        ev = _concat(self.kept, self.columns())
        self.rows = []
        done = np.fmax(ev["end"], ev["start"])
        last = float(done.max(initial=0.0)) if np.isinf(until) else until
        out = np.flatnonzero((done > self.taken) & (done <= until))
        out = out[np.argsort(done[out], kind="stable")]
        ticks = np.arange(self.next_tick, last + 1e-9, GAUGE_SECONDS)
        gauges = gauges_at(ev, ticks, self.seed)
        if ticks.size:
            self.next_tick = float(ticks[-1]) + GAUGE_SECONDS
        # Kept: what is not handed over yet, and spans the next gauge ticks still cover.
        keep = (done > until) | (ev["end"] > self.next_tick - GAUGE_SECONDS)
        self.kept = {k: col[keep] for k, col in ev.items()}
        self.taken = until
        return Chunk({k: col[out] for k, col in ev.items()}, gauges)

    def span(self, name: str, start: float, end: float, source: str, step: int, *,
             rank: int = -1, server: int = -1, slot: int = -1, status: str | None = None,
             tokens: int = -1, sample: tuple[str | None, str | None] = (None, None)) -> None:
        self.rows.append((name, start, end, source, step, rank, server, slot, status, tokens,
                          *sample))

    def instant(self, name: str, t: float, source: str, step: int) -> None:
        self.span(name, t, float("nan"), source, step)

    def generate(self, i: int, batch: Batch) -> list[tuple[float, int, int]]:
        """Place batch i's generations (and an eval set) on the slots; (end, job, policy
        step) of every finished one, job −1 for an eval generation. Every server takes step
        i−1's weights before this returns: one that runs out of work first waits for them,
        so batch i+1 is made by policy step i−1 at the oldest."""
        n = len(batch.sample_id)
        evals = EVAL_SIZE if i and i % EVAL_EVERY == 0 else 0
        tokens = np.concatenate([self.rng.integers(300, 900, evals), batch.tokens])
        seconds = (PREFILL + tokens / DECODE_RATE) * self.rng.normal(1.0, 0.04, tokens.size)
        jobs = deque(range(-evals, n))
        done: list[tuple[float, int, int]] = []
        self.synced = [self.pending is None] * SERVERS
        _, a, _ = self.pending or (0, np.inf, 0)
        lanes = range(len(self.free))
        while jobs:
            lane = min(lanes, key=self.free.__getitem__)
            s, t = lane // SLOTS, self.free[lane]
            if not self.synced[s] and t >= a:
                self.sync(s)
                continue
            job = jobs.popleft()
            k = job + evals
            end = t + float(seconds[k])
            sample = (None, None) if job < 0 else (batch.sample_id[job], batch.group_id[job])
            if not self.synced[s] and end - a > CANCEL_LEFT and self.rng.random() < CANCEL_P:
                self.span("generation", t, a, "inference", self.policy[s], server=s,
                          slot=lane % SLOTS, status="canceled", sample=sample,
                          tokens=int(tokens[k] * (a - t) / (end - t)))
                jobs.appendleft(job)  # queued again: generated anew after the sync
                self.free[lane] = a
                continue
            status = "eval" if job < 0 else "discarded" if batch.discarded[job] else "normal"
            self.span("generation", t, end, "inference", self.policy[s], server=s,
                      slot=lane % SLOTS, status=status, tokens=int(tokens[k]), sample=sample)
            done.append((end, job, self.policy[s]))
            self.free[lane] = end + SLOT_GAP
        for s in range(SERVERS):
            if not self.synced[s]:
                self.sync(s)
        return done

    def sync(self, s: int) -> None:
        """Server s loads the pending broadcast: each slot's sync starts when it is free (at
        the earliest with the broadcast), and all end after the broadcast and the load."""
        assert self.pending is not None
        step, a, b = self.pending
        lanes = range(s * SLOTS, (s + 1) * SLOTS)
        end = max(b, *(self.free[lane] for lane in lanes)) + LOAD * self.rng.uniform(0.8, 1.2)
        for lane in lanes:
            self.span("weight_sync", max(a, self.free[lane]), end, "inference", step,
                      server=s, slot=lane % SLOTS)
            self.free[lane] = end + SLOT_GAP
        self.policy[s] = step
        self.synced[s] = True

    def score(self, i: int, batch: Batch, done: list[tuple[float, int, int]]) -> float:
        """Score the finished generations in the order they ended; when the batch's last
        reward is in. Records each sample's off-policy distance."""
        n = len(batch.sample_id)
        off = np.zeros(n, dtype=np.int64)
        last = 0.0
        eval_seconds = self.rng.uniform(0.02, 0.08, len(done))
        for k, (end, job, policy) in enumerate(sorted(done)):
            seconds = eval_seconds[k] if job < 0 else float(batch.reward_seconds[job])
            start = max(end + 0.005, self.reward_free)
            self.reward_free = start + seconds
            if job < 0:
                self.span("compute_reward", start, self.reward_free, "reward", -1,
                          status="eval")
                continue
            status = "discarded" if batch.discarded[job] else "normal"
            self.span("compute_reward", start, self.reward_free, "reward", i, status=status,
                      sample=(batch.sample_id[job], batch.group_id[job]))
            off[job] = (i - 1) - policy
            last = max(last, self.reward_free)
        self.off_policy.append(off)
        return last

    def train(self, i: int, saved: float, tokens: float) -> None:
        """Trainer step i on both ranks, from the saved batch (and the previous step's end)."""
        start = max(saved, self.trainer_end) + DATA
        size = 0.6 + 0.4 * tokens / MEAN_TOKENS  # longer completions, longer steps
        slow = STRAGGLE if self.rng.random() < STRAGGLE_P else 1.0
        jitter = self.rng.normal(1.0, 0.03, (RANKS, MICROBATCHES, 2))
        passes = [self.microbatches(i, rank, start, size * (slow if rank == 1 else 1.0),
                                    jitter[rank]) for rank in range(RANKS)]
        opt = max(done for _, done in passes)  # the all-reduce waits for the slowest rank
        bcast = opt + OPTIMIZER * self.rng.uniform(0.95, 1.05)
        end = bcast + BROADCAST * self.rng.uniform(0.9, 1.1)
        for rank in range(RANKS):
            self.span("optimizer_step", opt, bcast, "trainer", i, rank=rank)
            self.span("weight_broadcast", bcast, end, "trainer", i, rank=rank)
        self.pending = (i, bcast, end)
        mine = passes[0][0]  # what rank 0 times of itself (the derived ones: the slowest rank's)
        self.measured.append({
            "timing_step_total": end - self.trainer_end,
            "timing_step_active": end - start,
            "timing_waiting_for_data": start - self.trainer_end,
            "timing_forward_total": float(mine[:, 0].sum()),
            "timing_backward_total": float(mine[:, 1].sum()),
            "timing_forward_microbatch_mean": float(mine[:, 0].mean()),
        })
        self.trainer_end = end
        self.step_end.append(end)

    def microbatches(self, i: int, rank: int, start: float, factor: float,
                     jitter: np.ndarray) -> tuple[np.ndarray, float]:
        """A rank's `train_step` and its nested passes: their (forward, backward) seconds, and
        when the rank was done."""
        seconds = np.array([FORWARD, BACKWARD]) * factor * jitter  # (MICROBATCHES, 2)
        seconds[0, 0] += COMPILE if i == 0 else 0.0
        t = start
        for forward, backward in seconds.tolist():
            middle, end = t + forward, t + forward + backward
            self.span("train_step/forward", t, middle, "trainer", i, rank=rank)
            self.span("train_step/backward", middle, end, "trainer", i, rank=rank)
            t = end
        self.span("train_step", start, t, "trainer", i, rank=rank)
        return seconds, t

    def columns(self) -> dict[str, np.ndarray]:
        """The events recorded since the last `take`, columnar."""
        if not self.rows:
            return _empty()
        cols = zip(*self.rows, strict=True)
        return {name: _column(name, col) for name, col in zip(_COLUMNS, cols, strict=True)}


def _column(name: str, values: Sequence[Any]) -> np.ndarray:
    if name in _FLOATS or name in _INTS:
        kind = np.float64 if name in _FLOATS else np.int64
        return np.fromiter(values, dtype=kind, count=len(values))
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


def _empty() -> dict[str, np.ndarray]:
    return {name: _column(name, []) for name in _COLUMNS}


def _concat(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {k: np.concatenate([a[k], b[k]]) for k in a}
