"""Where the time goes: the per-step `timing_*` series (catalog kind `timeline`) and the time
buckets of the Performance page, as exact functions of a run's events (docs/statistics.md
"Where the time goes").

Pure: numpy only, vectorized (no Python loop per event). Storage decodes a run's stored event
batches into one `EventTable` (ingest.core.eventstore) and the pipeline writes what
`step_series` returns as points; the read API calls `buckets` on a window's events.

The definitions (DESIGN "Where the time goes"), with the choices the text leaves open:

- A *span* has an end; an *instant* (end NaN) has none. Only spans have durations; instants
  mark times (`save_batch`, `training_loop_start`).
- Events without a rank form one rank of their own (a single-process trainer sends none);
  the same for a null server.
- Per step i (trainer events: source `trainer` and step i, spans and instants): start_i = min
  start, end_i = max end (an instant's end is its start). The *previous* step of i is the
  nearest smaller step that has trainer events. `timing_step_active` = end_i − start_i;
  `timing_step_total` = end_i − end_prev; `timing_waiting_for_data` = max(0, start_i −
  end_prev); without a previous step, `training_loop_start` stands in for end_prev when there
  is one (the run's earliest such instant, any source), else the step has no point for those
  two.
- `timing_<op>_total` (op = the whole name, nested ones included): per rank the sum of the
  durations of the step's trainer spans named op, then the largest over ranks;
  `timing_<op>_microbatch_mean` = their mean duration over all ranks. A step without a span
  of op has neither; an op whose `timing_<op>_total` would be a series defined here (`step`,
  `weight_sync_trainer`, `weight_sync_inference`) has no `_total` (its `_microbatch_mean`
  stays). `timing_microbatch_count` = the most spans named `forward` (or whose last
  `/` segment is `forward`: counted per name) on one rank; a step without one has no point.
- `timing_rank_spread` = the largest over ranks / the median over ranks of the per-rank sum of
  the durations of the step's *top-level* trainer spans (names without `/`), over the ranks
  that have one (a null rank left out); `timing_slowest_rank` = the rank of that largest sum
  (the smallest rank on ties). Fewer than 2 ranks or a median of 0: neither has a point.
- `timing_weight_sync_trainer_total` = `timing_weight_broadcast_total` (also given under its
  own name); `timing_weight_sync_inference_total` = max end − min start of the step's
  `weight_sync` spans of source `inference` (over servers).
- `save_batch` of step i: the earliest `save_batch` event (instant or span: its start) with
  step i, any source. The inference window of step i is (s_prev, s_i] where s_prev is the
  save_batch of the nearest smaller step that has one, else `training_loop_start` when it is
  earlier than s_i; else step i has no window and no point for the window series. A window
  with s_prev ≥ s_i (save_batch times going backwards) is none either.
- A `generation` or `compute_reward` span (any source) belongs to the window holding its end
  (to each one holding it, should windows overlap); its duration is clipped to the window.
  Lanes = `lanes` given (config.inference_lanes), else the distinct (server, slot) pairs of
  the run's generation spans; 0 lanes: no pct points.
  `timing_generation_{normal,discarded,canceled,all}_pct` = 100 · Σ clipped durations / (window
  length · lanes), a null status counting as normal, `eval` only in `all`;
  `timing_compute_reward_{normal,discarded,all}_pct` likewise with canceled ones left out
  (of `all` too); `timing_idle_pct` = max(0, 100 − generation all − compute_reward all);
  `timing_avg_inference_time` = mean unclipped duration of the window's generations that are
  not canceled; `timing_avg_compute_reward_time` = mean of the window's compute_reward
  durations > 0 (canceled left out). No generation (compute_reward) in the window: the mean has
  no point; the pcts are 0.
- A point's time: end_i when the step has trainer events, else its save_batch time, else the
  latest end of its weight syncs. `StepTimings` holds the series that have a point and the
  steps that have one.

Buckets of B seconds over [t0, t1): bucket k covers [k·B, (k+1)·B), every k with
floor(t0/B) ≤ k and k·B < t1; a time t lies in bucket floor(t/B). Buckets are whole: the first
may start before t0 and the last end after t1, so the events given are those overlapping
[floor(t0/B)·B, end of the last bucket). `generations` = generation spans ending in the bucket
that are not canceled; `generations_canceled` = canceled ones; `tokens_per_second` = Σ tokens
of the former (null left out) / B; `inference_utilization_pct` = 100 · Σ overlap of every
generation span with the bucket / (lanes · B) (null when lanes = 0); `weight_sync_pct` = 100 ·
mean over `servers` of |union of the server's weight_sync spans (any source; a null server is
one) ∩ bucket| / B (null when no server); `trainer_working_pct` = 100 · mean over `ranks` of
|union of that rank's top-level trainer spans (names without `/`, any step) ∩ bucket| / B
(null when no rank); `trainer_idle_pct` = 100 − working.
`partial` marks the bucket holding `latest` (the run's latest event time: max of ends and
instants' starts).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ingest.core.intervals import (
    distinct,
    distinct_pairs,
    factorize,
    group_reduce,
    in_windows,
    label_groups,
    label_mask,
    mean,
    overlap,
    union,
)
from trainer_hooks.wire.schema import EVENT_STATUSES

NORMAL, DISCARDED, CANCELED, EVAL = range(len(EVENT_STATUSES))  # status codes; -1 = null


@dataclass
class EventTable:
    """Events of a run (or a window), columnar. Label columns are int32 codes into their
    lists (-1 = null); integer columns int64 with -1 for null; `end` NaN for an instant."""

    names: list[str]
    name: np.ndarray  # int32
    sources: list[str]
    source: np.ndarray  # int32
    start: np.ndarray  # float64
    end: np.ndarray  # float64
    step: np.ndarray  # int64
    rank: np.ndarray  # int64
    servers: list[str | int]
    server: np.ndarray  # int32
    slot: np.ndarray  # int64
    status: np.ndarray  # int8, codes into EVENT_STATUSES
    tokens: np.ndarray  # int64
    # Only for the read API (not used by the formulas): sample and group ids, as Labels lists.
    sample_ids: list[str | int] = field(default_factory=list)
    sample_id: np.ndarray | None = None  # int32
    group_ids: list[str | int] = field(default_factory=list)
    group_id: np.ndarray | None = None  # int32

    @property
    def n(self) -> int:
        return int(self.start.shape[0])


@dataclass
class StepTimings:
    """`values[i, j]` is series `keys[j]` (a `timing_*` name) at step `steps[i]`, NaN = no
    point; `times[i]` is step `steps[i]`'s point time. Steps ascending, keys sorted."""

    steps: np.ndarray  # int64 (m,)
    times: np.ndarray  # float64 (m,)
    keys: list[str]
    values: np.ndarray  # float64 (m, k)


@dataclass
class Buckets:
    """The Performance page's buckets: `time[k]` is bucket k's start; each series one value
    per bucket (NaN = null)."""

    bucket: float
    time: np.ndarray  # float64 (b,)
    partial: np.ndarray  # bool (b,)
    series: dict[str, np.ndarray]  # the seven names of docs/protocol.md, float64 (b,)


BUCKET_SERIES = ("generations", "generations_canceled", "tokens_per_second",
                 "inference_utilization_pct", "weight_sync_pct", "trainer_working_pct",
                 "trainer_idle_pct")


# Series of fixed names; an op whose `timing_<op>_total` would be one of them has no `_total`.
STEP_KEYS = ("timing_step_total", "timing_step_active", "timing_waiting_for_data")
WINDOW_KEYS = tuple(f"timing_generation_{s}_pct" for s in ("normal", "discarded", "canceled",
                                                            "all")) + tuple(
    f"timing_compute_reward_{s}_pct" for s in ("normal", "discarded", "all")) + (
    "timing_idle_pct", "timing_avg_inference_time", "timing_avg_compute_reward_time")
FIXED_KEYS = frozenset((*STEP_KEYS, *WINDOW_KEYS, "timing_microbatch_count",
                        "timing_weight_sync_trainer_total", "timing_weight_sync_inference_total",
                        "timing_rank_spread", "timing_slowest_rank"))


class _View:
    """The masks and derived columns of one EventTable the formulas share."""

    def __init__(self, ev: EventTable) -> None:
        self.ev = ev
        self.span = ~np.isnan(ev.end)
        self.names, self.name = label_groups(ev.names, ev.name)
        self.trainer = label_mask(ev.sources, ev.source, "trainer")
        self.inference = label_mask(ev.sources, ev.source, "inference")
        # trainer spans of a top-level name (no `/`): nested time is inside one of them
        self.top = self.trainer & self.span & ~np.array(
            ["/" in str(n) for n in self.names] or [False])[self.name]

    def named(self, name: str) -> np.ndarray:
        if name not in self.names:
            return np.zeros(self.ev.n, dtype=bool)
        mask: np.ndarray = self.name == self.names.index(name)
        return mask

    def training_loop_start(self) -> float:
        at = self.ev.start[self.named("training_loop_start") & ~self.span]
        return float(at.min()) if at.size else np.nan


def inference_lanes(ev: EventTable, lanes: int | None = None) -> int:
    """`lanes` when given, else the distinct (server, slot) pairs of the generation spans."""
    if lanes is not None:
        return int(lanes)
    view = _View(ev)
    gen = view.named("generation") & view.span
    _, server = label_groups(ev.servers, ev.server[gen])
    return distinct_pairs(server, ev.slot[gen])


def distinct_servers(ev: EventTable) -> int:
    """`buckets`' `servers`: distinct servers (null one of them) of the generation and
    weight_sync spans."""
    view = _View(ev)
    rows = (view.named("generation") | view.named("weight_sync")) & view.span
    return int(distinct(label_groups(ev.servers, ev.server[rows])[1]).size)


def distinct_ranks(ev: EventTable) -> int:
    """`buckets`' `ranks`: distinct ranks (null one of them) of the trainer spans."""
    view = _View(ev)
    return int(distinct(ev.rank[view.trainer & view.span]).size)


def step_series(ev: EventTable, lanes: int | None = None) -> StepTimings:
    """Every `timing_*` series of every step of a run's events (all of the run's events)."""
    view = _View(ev)
    has_step = ev.step >= 0
    trainer = view.trainer & has_step
    save = view.named("save_batch") & has_step
    wsync = view.named("weight_sync") & view.span & view.inference & has_step
    steps = factorize(np.concatenate([ev.step[trainer], ev.step[save], ev.step[wsync]]))[0]
    m = steps.size
    cols: dict[str, np.ndarray] = {}
    tls = view.training_loop_start()
    end_i = _trainer_steps(view, trainer, steps, tls, cols)
    _op_series(view, trainer & view.span, steps, cols)
    _rank_series(view, view.top & has_step & (ev.rank >= 0), steps, cols)
    at = np.searchsorted(steps, ev.step[wsync])
    sync_end = group_reduce(np.maximum, at, ev.end[wsync], m)
    cols["timing_weight_sync_inference_total"] = sync_end - group_reduce(
        np.minimum, at, ev.start[wsync], m)
    saved = group_reduce(np.minimum, np.searchsorted(steps, ev.step[save]), ev.start[save], m)
    _window_series(view, saved, tls, inference_lanes(ev, lanes), cols)
    times = np.where(np.isnan(end_i), np.where(np.isnan(saved), sync_end, saved), end_i)
    keys = sorted(k for k, v in cols.items() if not np.all(np.isnan(v)))
    values = np.column_stack([cols[k] for k in keys]) if keys else np.zeros((m, 0))
    rows = ~np.all(np.isnan(values), axis=1)  # a save_batch without a window: no point
    return StepTimings(steps=steps[rows], times=times[rows], keys=keys, values=values[rows])


def _trainer_steps(view: _View, trainer: np.ndarray, steps: np.ndarray, tls: float,
                   cols: dict[str, np.ndarray]) -> np.ndarray:
    """Step active / total / waiting into `cols`; returns end_i (NaN: no trainer events)."""
    ev, m = view.ev, steps.size
    at = np.searchsorted(steps, ev.step[trainer])
    start_i = group_reduce(np.minimum, at, ev.start[trainer], m)
    end_i = group_reduce(np.maximum, at, np.fmax(ev.end, ev.start)[trainer], m)
    own = np.flatnonzero(~np.isnan(end_i))
    prev = np.concatenate([[tls], end_i[own[:-1]]])
    total, active, waiting = (np.full(m, np.nan) for _ in range(3))
    active[own] = end_i[own] - start_i[own]
    total[own] = end_i[own] - prev
    waiting[own] = np.maximum(0.0, start_i[own] - prev)
    cols.update(timing_step_total=total, timing_step_active=active,
                timing_waiting_for_data=waiting)
    return end_i


def _op_series(view: _View, spans: np.ndarray, steps: np.ndarray,
               cols: dict[str, np.ndarray]) -> None:
    """`timing_<op>_total`, `_microbatch_mean`, `timing_microbatch_count` and the trainer's
    weight sync into `cols`: one pass over every (op, step, rank) at once."""
    ev, m = view.ev, steps.size
    op = view.name[spans]
    ranks, rank = factorize(ev.rank[spans])
    n_ranks = max(ranks.size, 1)
    op_step = op * m + np.searchsorted(steps, ev.step[spans])
    keys, cell = factorize(op_step * n_ranks + rank)  # (op, step, rank) cells
    duration = (ev.end - ev.start)[spans]
    per_rank = np.bincount(cell, duration, keys.size)
    pairs, pair_of_cell = factorize(keys // n_ranks)  # (op, step), sorted as the cells are
    firsts = np.flatnonzero(np.diff(pair_of_cell, prepend=-1))
    worst = np.maximum.reduceat(per_rank, firsts) if keys.size else per_rank
    pair = pair_of_cell[cell]
    avg = mean(np.bincount(pair, duration, pairs.size), np.bincount(pair, minlength=pairs.size))
    count = np.bincount(cell, minlength=keys.size).astype(np.float64)
    forward = np.array([n.rsplit("/", 1)[-1] == "forward" for n in view.names] or [False])
    is_forward = forward[keys // n_ranks // m]
    cols["timing_microbatch_count"] = group_reduce(
        np.maximum, (keys // n_ranks % m)[is_forward], count[is_forward], m)
    pair_op, pair_step = pairs // m, pairs % m
    for o in distinct(pair_op).tolist():  # one loop per op name
        mine = pair_op == o
        total, per = np.full(m, np.nan), np.full(m, np.nan)
        total[pair_step[mine]] = worst[mine]
        per[pair_step[mine]] = avg[mine]
        name = str(view.names[o])
        if f"timing_{name}_total" not in FIXED_KEYS:
            cols[f"timing_{name}_total"] = total
        cols[f"timing_{name}_microbatch_mean"] = per
        if name == "weight_broadcast":
            cols["timing_weight_sync_trainer_total"] = total


def _rank_series(view: _View, spans: np.ndarray, steps: np.ndarray,
                 cols: dict[str, np.ndarray]) -> None:
    """`timing_rank_spread` and `timing_slowest_rank` into `cols` from the top-level spans of
    ranked trainer events: per (step, rank) cell the sum of their durations, then per step."""
    ev, m = view.ev, steps.size
    ranks, rank = factorize(ev.rank[spans])
    width = max(ranks.size, 1)
    keys, cell = factorize(np.searchsorted(steps, ev.step[spans]) * width + rank)
    per_rank = np.bincount(cell, (ev.end - ev.start)[spans], keys.size)
    step, who = keys // width, ranks[keys % width].astype(np.float64)
    n = np.bincount(step, minlength=m)
    first = np.cumsum(n) - n
    ordered = per_rank[np.lexsort((per_rank, step))]  # by step, then sum: medians by position
    median, worst = np.full(m, np.nan), np.full(m, np.nan)
    many = np.flatnonzero(n >= 2)
    median[many] = (ordered[first[many] + (n[many] - 1) // 2]
                    + ordered[first[many] + n[many] // 2]) / 2
    worst[many] = ordered[first[many] + n[many] - 1]
    median[median == 0] = np.nan
    at_max = per_rank == worst[step]  # False where the step has fewer than 2 ranks (NaN)
    slowest = group_reduce(np.minimum, step[at_max], who[at_max], m)
    cols["timing_rank_spread"] = worst / median
    cols["timing_slowest_rank"] = np.where(np.isnan(median), np.nan, slowest)


def _window_series(view: _View, saved: np.ndarray, tls: float, lanes: int,
                   cols: dict[str, np.ndarray]) -> None:
    """The inference-window series into `cols` (steps with a save_batch have a window)."""
    ev, m = view.ev, saved.size
    own = np.flatnonzero(~np.isnan(saved))
    b = saved[own]
    a = np.concatenate([[tls if b.size and tls < b[0] else np.nan], b[:-1]])
    ok = a < b  # a window of no length (save_batch times going backwards) is none
    own, a, b = own[ok], a[ok], b[ok]
    w = own.size
    capacity = (b - a) * max(lanes, 1)  # lanes = 0: no pct points (left out below)
    out: dict[str, np.ndarray] = {}
    for kind in ("generation", "compute_reward"):
        rows = np.flatnonzero(view.named(kind) & view.span)
        win, j = in_windows(ev.end[rows], a, b)
        j = rows[j]
        status = ev.status[j].astype(np.int64)
        end, start = ev.end[j], ev.start[j]  # (gathered once)
        duration = end - start
        clipped = end - np.maximum(start, a[win])
        # Σ clipped per (window, status + 1): null, normal, discarded, canceled, eval
        by = np.bincount(win * 5 + status + 1, clipped, 5 * w).reshape(w, 5) / capacity[:, None]
        pct = {"normal": by[:, 0] + by[:, 1], "discarded": by[:, 2], "canceled": by[:, 3],
               "all": by.sum(axis=1)}
        kept = status != CANCELED
        if kind == "generation":
            counted, avg = kept, "timing_avg_inference_time"
        else:
            del pct["canceled"]
            pct["all"] = pct["all"] - by[:, 3]
            counted, avg = kept & (duration > 0), "timing_avg_compute_reward_time"
        for c, values in pct.items():
            out[f"timing_{kind}_{c}_pct"] = 100.0 * values
        out[avg] = mean(np.bincount(win[counted], duration[counted], w),
                        np.bincount(win[counted], minlength=w))
    out["timing_idle_pct"] = np.maximum(0.0, 100.0 - out["timing_generation_all_pct"]
                                        - out["timing_compute_reward_all_pct"])
    for key in WINDOW_KEYS:
        if lanes > 0 or not key.endswith("_pct"):
            cols[key] = np.full(m, np.nan)
            cols[key][own] = out[key]


def buckets(ev: EventTable, bucket: float, t0: float, t1: float, *, lanes: int,
            servers: int, ranks: int, latest: float | None) -> Buckets:
    """The buckets over [t0, t1) of `ev` (every event overlapping those whole buckets), with
    the run's lane, server and rank counts (`servers`: distinct servers of the run's generation
    and weight_sync spans, `distinct_servers`; `ranks`: distinct ranks of its trainer spans,
    null one of them, `distinct_ranks`)."""
    width = float(bucket)
    if not width > 0:
        raise ValueError(f"bucket must be > 0 seconds, not {bucket!r}")
    k0 = int(np.floor(t0 / width))
    time = (k0 + np.arange(max(0, int(np.ceil(t1 / width)) - k0 + 1))) * width
    time = time[time < t1]  # every k ≥ floor(t0 / B) with k·B < t1
    nb = time.size
    view = _View(ev)
    gen = view.named("generation") & view.span
    at = np.floor(ev.end[gen] / width).astype(np.int64) - k0
    inside = (at >= 0) & (at < nb)
    canceled = ev.status[gen] == CANCELED
    done = inside & ~canceled
    tokens = ev.tokens[gen]
    series = {
        "generations": np.bincount(at[done], minlength=nb).astype(np.float64),
        "generations_canceled": np.bincount(at[inside & canceled], minlength=nb).astype(
            np.float64),
        "tokens_per_second": np.bincount(at[done & (tokens >= 0)],
                                         tokens[done & (tokens >= 0)], nb) / width,
        "inference_utilization_pct": _pct(overlap(ev.start[gen], ev.end[gen], k0, nb, width),
                                          lanes * width, nb),
    }
    sync = view.named("weight_sync") & view.span
    series["weight_sync_pct"] = _pct(_union_overlap(
        label_groups(ev.servers, ev.server[sync])[1], ev.start[sync], ev.end[sync], k0, nb,
        width), servers * width, nb)
    top = view.top
    working = _pct(_union_overlap(ev.rank[top], ev.start[top], ev.end[top], k0, nb, width),
                   ranks * width, nb)
    series["trainer_working_pct"] = working
    series["trainer_idle_pct"] = 100.0 - working
    partial = np.zeros(nb, dtype=bool)
    if latest is not None and nb:
        k = int(np.floor(latest / width)) - k0
        if 0 <= k < nb:
            partial[k] = True
    return Buckets(bucket=width, time=time, partial=partial,
                   series={name: series[name] for name in BUCKET_SERIES})


def _pct(covered: np.ndarray, capacity: float, nb: int) -> np.ndarray:
    if capacity <= 0:
        return np.full(nb, np.nan)
    return 100.0 * covered / capacity


def _union_overlap(group: np.ndarray, start: np.ndarray, end: np.ndarray, k0: int, nb: int,
                   width: float) -> np.ndarray:
    us, ue = union(group, start, end)
    return overlap(us, ue, k0, nb, width)
