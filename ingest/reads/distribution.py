"""Distribution over time: how the values of the reward, a sample metric or
the completion length spread at each step, as counts on a grid of step buckets × value bins.

Counted on request from the run's stored raw sample batches — the per-step aggregates keep
moments, not distributions. Kept samples only, finite values only, optionally one environment
(per docs/statistics.md, for every sample family). Bins span the run's range of the value; steps
are bucketed into at most `max_steps` columns of consecutive steps. Batches are read a chunk of
steps at a time, as the pipeline reads them, so memory stays bounded whatever the run's length;
counting is numpy over a chunk's samples. Counts need no canonical order, so a chunk gathers
only the three columns it needs with `ingest.core.columns`' column readers rather than assembling
whole `StepSamples` (`assemble_steps`, whose id sort would make the read 2.5x slower).

The read is of the batches that exist when it starts (ids up to the newest one then). Their
range is known beforehand: the run's observed range for the reward and sample metrics (widened
in the transaction that stores a batch), the stored per-step min / max for token counts (which
may lag the newest batches: then a second pass counts with the range the first one saw).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from django.db import connection

from ingest.core import columns
from ingest.core.observed import observed_ranges
from ingest.core.samples import DISCARD_NAMES
from ingest.core.series_ids import series_id
from ingest.models import Series
from ingest.reads import catalog as reads

# kind -> the keys it takes (None: any sample-metric name).
KEYS: dict[str, tuple[str, ...] | None] = {
    "reward": ("reward",),
    "sample": None,
    "rollouts": ("completion_tokens",),
}
DEFAULT_BINS, MIN_BINS, MAX_BINS = 40, 2, 200
DEFAULT_MAX_STEPS, MIN_MAX_STEPS, MAX_MAX_STEPS = 300, 1, 1000
STEPS_PER_CHUNK = 512  # steps read together (as in a pipeline pass) ...
SAMPLES_PER_CHUNK = 250_000  # ... as long as their samples stay under this (one step always)
MAX_INTEGER_SPAN = 2**40  # integer-aligned bins only where the edges stay exact floats


class DistributionError(ValueError):
    """A bad request, naming the field."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field, self.message = field, message


def check(kind: str | None, key: str | None) -> tuple[str, str]:
    """The (kind, key) asked for; DistributionError names the bad field."""
    if kind not in KEYS:
        raise DistributionError("kind", "kind must be one of " + ", ".join(KEYS))
    allowed = KEYS[kind]
    if not key:
        raise DistributionError("key", f"key is required for kind {kind}")
    if allowed is not None and key not in allowed:
        raise DistributionError("key", f"key must be {' or '.join(allowed)} for kind {kind}")
    return kind, key


# ---------------------------------------------------------------- pure core


@dataclass(frozen=True)
class StepGrid:
    """Steps first..last in buckets of `width` consecutive steps (the last may be shorter)."""

    first: int
    last: int
    width: int

    @classmethod
    def over(cls, first: int, last: int, max_steps: int) -> StepGrid:
        return cls(first, last, -(-(last - first + 1) // max_steps))

    @property
    def buckets(self) -> int:
        return -(-(self.last - self.first + 1) // self.width)

    def starts(self) -> np.ndarray:
        return self.first + self.width * np.arange(self.buckets, dtype=np.int64)

    def ends(self) -> np.ndarray:
        ends: np.ndarray = np.minimum(self.starts() + self.width - 1, self.last)
        return ends

    def bucket(self, steps: np.ndarray) -> np.ndarray:
        return (steps - self.first) // self.width


def bin_edges(lo: float, hi: float, bins: int, integer: bool) -> np.ndarray:
    """Edges of at most `bins` bins over [lo, hi]. Integer data get bins of a whole number of
    values, edges halfway between integers (so no bin is empty for want of an integer in it);
    else `bins` equal bins from lo to hi exactly. A single value gets one bin around it."""
    if integer:
        span = int(hi - lo) + 1
        width = -(-span // bins)
        return lo - 0.5 + width * np.arange(-(-span // width) + 1, dtype=np.float64)
    if hi == lo:
        return np.array([lo - 0.5, lo + 0.5])
    return np.linspace(lo, hi, bins + 1)


def count(bucket: np.ndarray, values: np.ndarray, edges: np.ndarray, n_buckets: int
          ) -> tuple[np.ndarray, int]:
    """Counts per (step bucket, bin) — bin i holds edges[i] <= v < edges[i + 1], the last bin
    also v == edges[-1] — and how many values fell outside the grid."""
    nb = edges.size - 1
    b = np.searchsorted(edges, values, side="right") - 1
    b[values == edges[-1]] = nb - 1
    inside = (b >= 0) & (b < nb) & (bucket >= 0) & (bucket < n_buckets)
    codes = bucket[inside] * nb + b[inside]
    counts = np.bincount(codes, minlength=n_buckets * nb).reshape(n_buckets, nb)
    return counts, int(values.size - np.count_nonzero(inside))


@dataclass
class Chunk:
    """The samples of some consecutive steps, as counting needs them: per sample its step,
    value (NaN for null or non-finite; None when no batch carried the value), whether it was
    kept, and its environment (a code into `env_names`, -1 for none)."""

    step: np.ndarray
    value: np.ndarray | None
    kept: np.ndarray
    env: np.ndarray
    env_names: list[str]


def gather(batches: list[tuple[int, columns.Raw]], kind: str, key: str) -> Chunk:
    """A Chunk of unpacked batches (with their steps), column by column over all of them."""
    raws = [r for _, r in batches]
    if kind == "sample":
        value = columns.float_column(raws, lambda r: r["metrics"].get(key))
    else:  # the reward and token columns sit at the top of a batch
        value = columns.float_column(raws, lambda r: r.get(key))
    names, env = columns.vocabulary(raws, "env")
    if names and names[0] == "":  # no environment given
        names, env = names[1:], env - 1
    # As aggregation reads them: a discard reason it does not know counts as kept.
    reasons, reason = columns.vocabulary(raws, "discard_reason")
    kept = np.array([r not in DISCARD_NAMES[1:] for r in reasons], dtype=bool)[reason]
    step = np.repeat(np.array([st for st, _ in batches], dtype=np.int64),
                     [r["n"] for r in raws])
    return Chunk(step, value, kept, env, names)


@dataclass
class Tally:
    """What one pass over the chunks found: counts on the grid (None when no range was known),
    the bin edges, values outside the grid, and the extent and environments of every value
    read (kept, finite; environments whatever the env filter)."""

    counts: np.ndarray | None = None
    edges: np.ndarray | None = None
    integer: bool = False
    outside: int = 0
    values_read: int = 0
    lo: float = np.inf
    hi: float = -np.inf
    envs: set[str] = field(default_factory=set)


def tally(chunks: Iterable[Chunk], env: str | None, grid: StepGrid, bins: int,
          value_range: tuple[float, float] | None) -> Tally:
    """Count the chunks' values on `grid` × bins over `value_range`. The bins are integer
    aligned when the range's bounds and every value of the first chunk with values are whole
    numbers. Without a range, only the extent is found."""
    t = Tally()
    for c in chunks:
        if c.value is None:
            continue
        usable = c.kept & np.isfinite(c.value)
        t.envs.update(c.env_names[e] for e in np.unique(c.env[usable]).tolist() if e >= 0)
        if env is not None:
            usable &= c.env == (c.env_names.index(env) if env in c.env_names else -2)
        x = c.value[usable]
        if not x.size:
            continue
        t.values_read += x.size
        t.lo, t.hi = min(t.lo, float(x.min())), max(t.hi, float(x.max()))
        if value_range is None:
            continue
        if t.edges is None:
            lo, hi = value_range
            t.integer = (float(lo).is_integer() and float(hi).is_integer()
                         and not np.any(np.mod(x, 1.0)) and hi - lo < MAX_INTEGER_SPAN)
            t.edges = bin_edges(lo, hi, bins, t.integer)
            t.counts = np.zeros((grid.buckets, t.edges.size - 1), dtype=np.int64)
        got, out = count(grid.bucket(c.step[usable]), x, t.edges, grid.buckets)
        t.counts += got
        t.outside += out
    return t


def chunk_bounds(sizes: np.ndarray) -> Iterator[tuple[int, int]]:
    """[i, j) slices of consecutive steps (samples per step `sizes`): at most STEPS_PER_CHUNK
    steps and SAMPLES_PER_CHUNK samples each, one step at least."""
    i = 0
    while i < sizes.size:
        total = np.cumsum(sizes[i:i + STEPS_PER_CHUNK])
        j = i + max(1, int(np.searchsorted(total, SAMPLES_PER_CHUNK, side="right")))
        yield i, j
        i = j


# ---------------------------------------------------------------- reading the run


def _last_batch(run_id: int) -> int | None:
    with connection.cursor() as cur:
        cur.execute("SELECT MAX(id) FROM ingest_samplebatch WHERE run_id = %s", [run_id])
        last: int | None = cur.fetchone()[0]
        return last


def _steps(run_id: int, last_id: int) -> tuple[np.ndarray, np.ndarray]:
    """The run's steps with samples, ascending, and their numbers of samples."""
    with connection.cursor() as cur:
        cur.execute("SELECT step, SUM(n) FROM ingest_samplebatch WHERE run_id = %s AND id <= %s"
                    " GROUP BY step ORDER BY step", [run_id, last_id])
        rows = cur.fetchall()
    table = np.array(rows, dtype=np.int64).reshape(-1, 2)
    return table[:, 0], table[:, 1]


def _chunks(run_id: int, last_id: int, steps: np.ndarray, sizes: np.ndarray, kind: str,
            key: str) -> Iterator[Chunk]:
    """The samples of the steps, read a chunk of steps at a time."""
    for i, j in chunk_bounds(sizes):
        with connection.cursor() as cur:
            cur.execute("SELECT step, data FROM ingest_samplebatch WHERE run_id = %s"
                        " AND id <= %s AND step >= %s AND step <= %s",
                        [run_id, last_id, int(steps[i]), int(steps[j - 1])])
            batches = [(step, columns.unpack(data)) for step, data in cur.fetchall()]
        if batches:
            yield gather(batches, kind, key)


def known_range(run_id: int, kind: str, key: str, env: str | None
                ) -> tuple[float, float] | None:
    """The value's range over the run (in `env`, or over every environment) before reading
    any sample: the observed range of the reward and sample metrics, the extremes of the
    stored per-step min and max of token counts. None when there is none yet."""
    if kind in ("reward", "sample"):
        found = [r for (e, k, m), r in observed_ranges(run_id).items()
                 if k == kind and m == key and (env is None or e == env)]
        return (min(r[0] for r in found), max(r[1] for r in found)) if found else None
    sids = [series_id(kind, key, stat, env) for stat in ("min", "max")]
    pks = dict(Series.objects.filter(run_id=run_id, sid__in=sids).values_list("sid", "pk"))
    if len(pks) < 2:
        return None
    _, arrays = reads.CACHE.get(run_id, [pks[sid] for sid in sids])
    lows, highs = arrays[pks[sids[0]]][2], arrays[pks[sids[1]]][2]
    if not lows.size or not highs.size:
        return None
    return float(lows.min()), float(highs.max())


class Recent:
    """The last payloads computed, per (run, its newest batch, request): reopening a heatmap
    or going back to an environment costs nothing, and any new batch makes a new key."""

    def __init__(self, size: int = 32) -> None:
        self.size = size
        self.lock = threading.Lock()
        self.items: OrderedDict[tuple[Any, ...], dict[str, Any]] = OrderedDict()

    def get(self, key: tuple[Any, ...]) -> dict[str, Any] | None:
        with self.lock:
            if key in self.items:
                self.items.move_to_end(key)
            return self.items.get(key)

    def put(self, key: tuple[Any, ...], payload: dict[str, Any]) -> None:
        with self.lock:
            self.items[key] = payload
            while len(self.items) > self.size:
                self.items.popitem(last=False)


RECENT = Recent()


def distribution(run_id: int, kind: str, key: str, env: str | None = None,
                 bins: int = DEFAULT_BINS, max_steps: int = DEFAULT_MAX_STEPS) -> dict[str, Any]:
    """The distribution payload of the read API (docs/protocol.md). `bins` and `max_steps`
    are clamped to their limits; a run or value without samples gives empty arrays."""
    kind, key = check(kind, key)
    bins = min(max(bins, MIN_BINS), MAX_BINS)
    max_steps = min(max(max_steps, MIN_MAX_STEPS), MAX_MAX_STEPS)
    out: dict[str, Any] = {"kind": kind, "key": key, "env": env, "bins": [], "integer": False,
                           "steps": [], "step_end": [], "step_width": None, "counts": [],
                           "total": 0, "outside": 0, "range": None, "envs": []}
    last_id = _last_batch(run_id)
    if last_id is None:
        return out
    recent = (run_id, last_id, kind, key, env, bins, max_steps)
    found = RECENT.get(recent)
    if found is None:
        found = _count(run_id, last_id, kind, key, env, bins, max_steps)
        RECENT.put(recent, found)
    return {**out, **found}


def _count(run_id: int, last_id: int, kind: str, key: str, env: str | None, bins: int,
           max_steps: int) -> dict[str, Any]:
    """The payload's counts from the batches up to `last_id`."""
    steps, sizes = _steps(run_id, last_id)
    grid = StepGrid.over(int(steps[0]), int(steps[-1]), max_steps)
    value_range = known_range(run_id, kind, key, env)
    source = "observed" if kind in ("reward", "sample") else "samples"
    for _ in range(2):
        t = tally(_chunks(run_id, last_id, steps, sizes, kind, key), env, grid, bins,
                  value_range)
        if t.values_read == 0 or (t.counts is not None and not t.outside):
            break
        # The samples read went beyond the range known before (it lagged): count again.
        lo, hi = value_range or (t.lo, t.hi)
        value_range, source = (min(lo, t.lo), max(hi, t.hi)), "samples"
    if t.counts is None or value_range is None:
        return {"envs": sorted(t.envs)}
    return {"bins": t.edges, "integer": t.integer, "steps": grid.starts(),
            "step_end": grid.ends(), "step_width": grid.width, "counts": t.counts,
            "total": int(t.counts.sum()), "outside": t.outside, "envs": sorted(t.envs),
            "range": {"min": value_range[0], "max": value_range[1], "source": source}}
