"""A slow, plain-Python oracle of ingest.core.timeline (DESIGN "Where the time goes", as the
module's docstring decides it): one loop over the events per formula, Python floats, no numpy
arithmetic. Also `table`, which builds an EventTable from a list of dicts, for tests.

The oracle answers in plain containers: `step_series` → {step: (time, {key: value})} holding
only the points that exist; `buckets` → (times, partial, {series: [value or None]})."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any

import numpy as np

from ingest.core.timeline import BUCKET_SERIES, EventTable
from trainer_hooks.wire.schema import EVENT_STATUSES

# ---------------------------------------------------------------------------------------------
# Building an EventTable from dicts


def ev(name: str, start: float, end: float | None = None, **fields: Any) -> dict[str, Any]:
    """One event as a dict: `end` None for an instant; other fields as in PROTOCOL `events`
    (source defaults to trainer, everything else to null)."""
    return {"name": name, "start": start, "end": end, **fields}


def _codes(values: list[Any], rng: random.Random | None,
           extra: tuple[Any, ...] = ()) -> tuple[list[Any], list[int]]:
    """Label codes of `values` (None → -1); the label list in first-seen order, or shuffled."""
    labels: list[Any] = []
    for v in [*values, *extra]:
        if v is not None and v not in labels:
            labels.append(v)
    if rng is not None:
        rng.shuffle(labels)
    return labels, [-1 if v is None else labels.index(v) for v in values]


def table(rows: list[dict[str, Any]], *, rng: random.Random | None = None,
          extra_names: tuple[str, ...] = ()) -> EventTable:
    """An EventTable of `rows` (dicts as `ev` makes them). With `rng`, label lists come in a
    random order; `extra_names` are names no event uses (they must not make series)."""
    unknown = {k for r in rows for k in r} - {"name", "start", "end", "source", "step", "rank",
                                                "server", "slot", "status", "tokens"}
    assert not unknown, f"unknown event fields {unknown}"
    names, name = _codes([r["name"] for r in rows], rng, extra_names)
    sources, source = _codes([r.get("source", "trainer") for r in rows], rng)
    servers, server = _codes([r.get("server") for r in rows], rng)

    def ints(key: str) -> np.ndarray:
        return np.array([-1 if r.get(key) is None else r[key] for r in rows], dtype=np.int64)

    return EventTable(
        names=names, name=np.array(name, dtype=np.int32),
        sources=sources, source=np.array(source, dtype=np.int32),
        start=np.array([r["start"] for r in rows], dtype=np.float64),
        end=np.array([math.nan if r["end"] is None else r["end"] for r in rows],
                     dtype=np.float64),
        step=ints("step"), rank=ints("rank"),
        servers=servers, server=np.array(server, dtype=np.int32),
        slot=ints("slot"),
        status=np.array([-1 if r.get("status") is None else EVENT_STATUSES.index(r["status"])
                         for r in rows], dtype=np.int8),
        tokens=ints("tokens"),
    )


# ---------------------------------------------------------------------------------------------
# Decoding: one plain record per event


@dataclass(frozen=True)
class Event:
    name: str
    source: str
    start: float
    end: float | None  # None: an instant
    step: int | None
    rank: int | None  # None is a rank of its own
    server: int | None  # the label code; None is a server of its own
    slot: int | None
    status: str | None
    tokens: int | None

    @property
    def span(self) -> bool:
        return self.end is not None

    @property
    def duration(self) -> float:
        assert self.end is not None
        return self.end - self.start

    @property
    def last(self) -> float:
        """The event's latest time: its end, or an instant's start."""
        return self.start if self.end is None else self.end


def decode(t: EventTable) -> list[Event]:
    out = []
    for i in range(t.n):
        def opt(col: np.ndarray) -> int | None:
            v = int(col[i])  # noqa: B023 (called right here)
            return None if v < 0 else v

        end = float(t.end[i])
        status = int(t.status[i])
        out.append(Event(
            name=t.names[int(t.name[i])], source=t.sources[int(t.source[i])],
            start=float(t.start[i]), end=None if math.isnan(end) else end,
            step=opt(t.step), rank=opt(t.rank), server=opt(t.server), slot=opt(t.slot),
            status=None if status < 0 else EVENT_STATUSES[status], tokens=opt(t.tokens)))
    return out


def mean(xs: list[float]) -> float:
    return sum(xs) / len(xs)


# ---------------------------------------------------------------------------------------------
# Lanes


def inference_lanes(events: list[Event], lanes: int | None = None) -> int:
    """`lanes` when given, else the distinct (server, slot) pairs of the generation spans."""
    if lanes is not None:
        return lanes
    pairs = set()
    for e in events:
        if e.name == "generation" and e.span:
            pairs.add((e.server, e.slot))
    return len(pairs)


# ---------------------------------------------------------------------------------------------
# Per step


def trainer_events(events: list[Event]) -> dict[int, list[Event]]:
    """{step: its trainer events (spans and instants)}."""
    out: dict[int, list[Event]] = {}
    for e in events:
        if e.source == "trainer" and e.step is not None:
            out.setdefault(e.step, []).append(e)
    return out


def loop_start(events: list[Event]) -> float | None:
    """The run's earliest `training_loop_start` instant (any source)."""
    times = [e.start for e in events if e.name == "training_loop_start" and not e.span]
    return min(times) if times else None


def step_bounds(evs: list[Event]) -> tuple[float, float]:
    """(start_i, end_i): min start, max end (an instant's end is its start)."""
    return min(e.start for e in evs), max(e.last for e in evs)


def step_times(trainer: dict[int, list[Event]], tls: float | None) -> dict[int, dict[str, float]]:
    """timing_step_active, timing_step_total, timing_waiting_for_data of each trainer step."""
    out: dict[int, dict[str, float]] = {}
    for i in trainer:
        start_i, end_i = step_bounds(trainer[i])
        points = {"timing_step_active": end_i - start_i}
        smaller = [j for j in trainer if j < i]
        end_prev = step_bounds(trainer[max(smaller)])[1] if smaller else tls
        if end_prev is not None:
            points["timing_step_total"] = end_i - end_prev
            points["timing_waiting_for_data"] = max(0.0, start_i - end_prev)
        out[i] = points
    return out


DERIVED_TOTALS = ("step", "weight_sync_trainer", "weight_sync_inference")  # ops with no _total


def op_timings(evs: list[Event]) -> dict[str, float]:
    """timing_<op>_total and timing_<op>_microbatch_mean of one step's trainer events; an op
    whose _total is a series of its own (`timing_step_total`, ...) has only the mean."""
    by_op: dict[str, dict[int | None, list[float]]] = {}
    for e in evs:
        if e.span:
            by_op.setdefault(e.name, {}).setdefault(e.rank, []).append(e.duration)
    out = {}
    for op, per_rank in by_op.items():
        if op not in DERIVED_TOTALS:
            out[f"timing_{op}_total"] = max(sum(ds) for ds in per_rank.values())
        out[f"timing_{op}_microbatch_mean"] = mean([d for ds in per_rank.values() for d in ds])
    return out


def microbatch_count(evs: list[Event]) -> float | None:
    """The most spans of one forward name (`forward` or `.../forward`) on one rank."""
    counts: dict[tuple[str, int | None], int] = {}
    for e in evs:
        if e.span and e.name.split("/")[-1] == "forward":
            counts[(e.name, e.rank)] = counts.get((e.name, e.rank), 0) + 1
    return float(max(counts.values())) if counts else None


def rank_spread(evs: list[Event]) -> dict[str, float]:
    """timing_rank_spread and timing_slowest_rank of one step's trainer events: per rank (a
    null rank left out) the sum of the durations of its top-level spans (names without `/`);
    the largest sum over the median sum, and the smallest rank with the largest sum. Nothing
    with fewer than 2 ranks or a median of 0."""
    sums: dict[int, float] = {}
    for e in evs:
        if e.span and "/" not in e.name and e.rank is not None:
            sums[e.rank] = sums.get(e.rank, 0.0) + e.duration
    if len(sums) < 2:
        return {}
    ordered = sorted(sums.values())
    half = len(ordered) // 2
    median = ordered[half] if len(ordered) % 2 else (ordered[half - 1] + ordered[half]) / 2
    if median == 0:
        return {}
    worst = ordered[-1]
    slowest = min(rank for rank, total in sums.items() if total == worst)
    return {"timing_rank_spread": worst / median, "timing_slowest_rank": float(slowest)}


def inference_weight_sync(events: list[Event]) -> dict[int, tuple[float, float]]:
    """{step: (min start, max end)} of the step's `weight_sync` spans of source inference."""
    out: dict[int, tuple[float, float]] = {}
    for e in events:
        if e.name == "weight_sync" and e.source == "inference" and e.span and e.step is not None:
            assert e.end is not None
            lo, hi = out.get(e.step, (e.start, e.end))
            out[e.step] = (min(lo, e.start), max(hi, e.end))
    return out


def save_batches(events: list[Event]) -> dict[int, float]:
    """{step: the start of its earliest `save_batch` event (instant or span), any source}."""
    out: dict[int, float] = {}
    for e in events:
        if e.name == "save_batch" and e.step is not None:
            out[e.step] = min(out.get(e.step, e.start), e.start)
    return out


def windows(saves: dict[int, float], tls: float | None) -> dict[int, tuple[float, float]]:
    """{step: (s_prev, s_i)}: the inference windows (s_prev, s_i]. An empty one (save_batch
    times going backwards, s_prev ≥ s_i) is no window: the docstring leaves it open, the
    implementation decides so, and a negative window length has no meaning."""
    out = {}
    for i, s_i in saves.items():
        smaller = [j for j in saves if j < i]
        if smaller:
            if saves[max(smaller)] < s_i:
                out[i] = (saves[max(smaller)], s_i)
        elif tls is not None and tls < s_i:
            out[i] = (tls, s_i)
    return out


GEN_PCTS = {"normal": ("normal", None), "discarded": ("discarded",), "canceled": ("canceled",),
            "all": ("normal", None, "discarded", "canceled", "eval")}
REWARD_PCTS = {"normal": ("normal", None), "discarded": ("discarded",),
               "all": ("normal", None, "discarded", "eval")}


def window_series(events: list[Event], lo: float, hi: float, lanes: int) -> dict[str, float]:
    """The window series of the window (lo, hi]."""
    inside = {"generation": [], "compute_reward": []}  # type: dict[str, list[Event]]
    for e in events:
        if e.name in inside and e.span:
            assert e.end is not None
            if lo < e.end <= hi:
                inside[e.name].append(e)
    out: dict[str, float] = {}
    for name, pcts in (("generation", GEN_PCTS), ("compute_reward", REWARD_PCTS)):
        if lanes > 0:
            for label, statuses in pcts.items():
                total = 0.0
                for e in inside[name]:
                    if e.status in statuses:
                        assert e.end is not None
                        total += min(e.end, hi) - max(e.start, lo)
                out[f"timing_{name}_{label}_pct"] = 100 * total / ((hi - lo) * lanes)
    if lanes > 0:
        out["timing_idle_pct"] = max(0.0, 100 - out["timing_generation_all_pct"]
                                     - out["timing_compute_reward_all_pct"])
    gens = [e.duration for e in inside["generation"] if e.status != "canceled"]
    if gens:
        out["timing_avg_inference_time"] = mean(gens)
    rewards = [e.duration for e in inside["compute_reward"]
               if e.status != "canceled" and e.duration > 0]
    if rewards:
        out["timing_avg_compute_reward_time"] = mean(rewards)
    return out


def step_series(events: list[Event], lanes: int | None = None
                ) -> dict[int, tuple[float, dict[str, float]]]:
    """{step: (point time, {timing_* key: value})}, only the points that exist."""
    trainer = trainer_events(events)
    tls = loop_start(events)
    syncs = inference_weight_sync(events)
    saves = save_batches(events)
    n_lanes = inference_lanes(events, lanes)
    points: dict[int, dict[str, float]] = {}
    for i, p in step_times(trainer, tls).items():
        points.setdefault(i, {}).update(p)
    for i, evs in trainer.items():
        points[i].update(op_timings(evs))
        points[i].update(rank_spread(evs))
        count = microbatch_count(evs)
        if count is not None:
            points[i]["timing_microbatch_count"] = count
        if "timing_weight_broadcast_total" in points[i]:
            points[i]["timing_weight_sync_trainer_total"] = \
                points[i]["timing_weight_broadcast_total"]
    for i, (lo, hi) in syncs.items():
        points.setdefault(i, {})["timing_weight_sync_inference_total"] = hi - lo
    for i, (lo, hi) in windows(saves, tls).items():
        points.setdefault(i, {}).update(window_series(events, lo, hi, n_lanes))
    out = {}
    for i, p in points.items():
        if not p:
            continue
        if i in trainer:
            time = step_bounds(trainer[i])[1]
        elif i in saves:
            time = saves[i]
        else:
            time = syncs[i][1]
        out[i] = (time, p)
    return out


# ---------------------------------------------------------------------------------------------
# Buckets


def overlap(start: float, end: float, lo: float, hi: float) -> float:
    return max(0.0, min(end, hi) - max(start, lo))


def union_overlap(spans: list[tuple[float, float]], lo: float, hi: float) -> float:
    """|union of spans ∩ [lo, hi)|: clip, sort, merge."""
    clipped = sorted((max(s, lo), min(e, hi)) for s, e in spans if min(e, hi) > max(s, lo))
    total, cur_s, cur_e = 0.0, None, None
    for s, e in clipped:
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                assert cur_s is not None
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        assert cur_s is not None
        total += cur_e - cur_s
    return total


def bucket_of(t: float, width: float) -> int:
    return math.floor(t / width)


def buckets(events: list[Event], width: float, t0: float, t1: float, *, lanes: int,
            servers: int, ranks: int, latest: float | None
            ) -> tuple[list[float], list[bool], dict[str, list[float | None]]]:
    """(bucket starts, partial, {series: one value per bucket, None = null})."""
    ks = []
    k = bucket_of(t0, width)
    while k * width < t1:
        ks.append(k)
        k += 1
    series: dict[str, list[float | None]] = {name: [] for name in BUCKET_SERIES}
    for k in ks:
        lo, hi = k * width, (k + 1) * width
        done = canceled = tokens = 0
        busy = 0.0
        sync: dict[int | None, list[tuple[float, float]]] = {}
        work: dict[int | None, list[tuple[float, float]]] = {}
        for e in events:
            if not e.span:
                continue
            assert e.end is not None
            if e.name == "generation":
                if bucket_of(e.end, width) == k:
                    if e.status == "canceled":
                        canceled += 1
                    else:
                        done += 1
                        tokens += e.tokens or 0
                busy += overlap(e.start, e.end, lo, hi)
            if e.name == "weight_sync":
                sync.setdefault(e.server, []).append((e.start, e.end))
            if e.source == "trainer" and "/" not in e.name:
                work.setdefault(e.rank, []).append((e.start, e.end))
        series["generations"].append(float(done))
        series["generations_canceled"].append(float(canceled))
        series["tokens_per_second"].append(tokens / width)
        series["inference_utilization_pct"].append(
            None if lanes == 0 else 100 * busy / (lanes * width))
        series["weight_sync_pct"].append(
            None if servers == 0
            else 100 * sum(union_overlap(s, lo, hi) for s in sync.values()) / servers / width)
        working = (None if ranks == 0
                   else 100 * sum(union_overlap(s, lo, hi) for s in work.values()) / ranks / width)
        series["trainer_working_pct"].append(working)
        series["trainer_idle_pct"].append(None if working is None else 100 - working)
    partial = [latest is not None and bucket_of(latest, width) == k for k in ks]
    return [k * width for k in ks], partial, series
