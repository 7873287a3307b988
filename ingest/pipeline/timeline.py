"""The derived `timing_*` series of a run (catalog kind `timeline`), kept equal to what the
formulas (ingest.core.timeline) give over all of its stored events, and written as points like
the other aggregates: only what changed since the last computation, a withdrawn point as a NaN
tombstone.

Every events message bumps the run's `TimelineState.version` in its own transaction; a pass
reads the version first and then every batch committed (so at least those of that version),
and records `done_version` = that version under the run's lock, never going back (a slower
process's older result is dropped). A pass decodes only the batches it has not seen (the run's
events are cached per process, `run_events`) and recomputes only the steps they can change
(ingest.core.timeline_delta: a late generation changes its window's step), everything when the
delta cannot tell (a new loop start, another lane count, save_batch times out of order, no
series stored yet). A barrier waits for `done_version` to reach the version it saw (`behind` /
`caught_up`).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from django.db import connection, transaction

from ingest.core import eventstore, pointstore
from ingest.core import timeline as formulas
from ingest.core.commit import Outcome, PointWriter, lock_run, publish_series_pks
from ingest.core.intervals import distinct, label_pairs
from ingest.core.timeline_delta import RowIndex, affected
from ingest.models import Run, Series
from ingest.reads.timeline import configured_lanes

log = logging.getLogger(__name__)
KIND = "timeline"


def dirty_runs() -> list[int]:
    """Runs whose events changed since their series were last computed."""
    with connection.cursor() as cur:
        cur.execute("SELECT run_id FROM ingest_timelinestate WHERE version > done_version")
        return [row[0] for row in cur.fetchall()]


def behind(run_id: int) -> int | None:
    """The run's timeline version when its series lag behind it, else None."""
    with connection.cursor() as cur:
        cur.execute("SELECT version, done_version FROM ingest_timelinestate WHERE run_id = %s",
                    [run_id])
        row = cur.fetchone()
    return None if row is None or row[1] >= row[0] else int(row[0])


def caught_up(run_id: int, version: int) -> bool:
    with connection.cursor() as cur:
        cur.execute("SELECT done_version FROM ingest_timelinestate WHERE run_id = %s", [run_id])
        row = cur.fetchone()
    return row is None or row[0] >= version


def run_lanes(run_id: int) -> int | None:
    return configured_lanes(Run.objects.filter(pk=run_id).values_list("config", flat=True)
                            .first())


# The decoded events of the runs last computed, per process: {run: Cached}. A run's batches
# are only ever appended, with ids rising in commit order (its writers hold the run's row lock
# while they insert), so a pass decodes only the batches after the last id it read, once the
# run's batches up to it are checked to be the ones cached (their first id and event count).
# At most CACHE_EVENTS events are kept (the least recently used run goes first).
CACHE_EVENTS = 4_000_000


class Growing:
    """A run's events as batches are appended: columns with room to grow (doubling, so an
    append copies only the new rows), label lists merged, the distinct (server, slot) pairs
    of its generation spans (its lanes) kept as they come, and the rows by step and end that
    ingest.core.timeline_delta reads (`rows`)."""

    NUMBERS = (("start", np.float64), ("end", np.float64), ("step", np.int64),
               ("rank", np.int64), ("slot", np.int64), ("status", np.int8),
               ("tokens", np.int64))
    LABELS = (("name", "names"), ("source", "sources"), ("server", "servers"))

    def __init__(self) -> None:
        self.n = 0
        self.cols: dict[str, np.ndarray] = {
            k: np.zeros(0, dtype=t) for k, t in self.NUMBERS + tuple(
                (code, np.int32) for code, _ in self.LABELS)}
        self.lists: dict[str, list[Any]] = {plural: [] for _, plural in self.LABELS}
        self.index: dict[str, dict[Any, int]] = {plural: {} for _, plural in self.LABELS}
        self.lanes: set[tuple[Any, Any]] = set()
        self.rows = RowIndex()

    def append(self, parts: list[formulas.EventTable]) -> None:
        """Append tables' rows (each with label lists of its own, integer columns of any
        width: eventstore.decode_each's blobs), written straight into the columns."""
        start = self.n
        end = start + sum(t.n for t in parts)
        if end > self.cols["start"].size:
            size = max(end, 2 * self.cols["start"].size, 4096)
            for k, col in self.cols.items():
                grown = np.empty(size, dtype=col.dtype)
                grown[:self.n] = col[:self.n]
                self.cols[k] = grown
        at = start
        for fresh in parts:
            rows = slice(at, at + fresh.n)
            for k, _ in self.NUMBERS:
                self.cols[k][rows] = getattr(fresh, k)
            for code, plural in self.LABELS:
                index, values = self.index[plural], self.lists[plural]
                remap = np.array([index.setdefault(v, len(index)) for v in getattr(fresh, plural)]
                                 + [-1], dtype=np.int32)
                values.extend(list(index)[len(values):])
                self.cols[code][rows] = remap[getattr(fresh, code)]
            at += fresh.n
        generation = self.index["names"].get("generation")
        if generation is not None and end > start:
            rows = slice(start, end)
            gen = (self.cols["name"][rows] == generation) & ~np.isnan(self.cols["end"][rows])
            self.lanes.update(label_pairs(self.lists["servers"], self.cols["server"][rows][gen],
                                          self.cols["slot"][rows][gen]))
        self.n = end
        self.rows.add(self.table())

    def table(self) -> formulas.EventTable:
        """The events so far (views of the columns: valid until the next append)."""
        c, n = self.cols, self.n
        return formulas.EventTable(
            names=self.lists["names"], name=c["name"][:n], sources=self.lists["sources"],
            source=c["source"][:n], start=c["start"][:n], end=c["end"][:n],
            step=c["step"][:n], rank=c["rank"][:n], servers=self.lists["servers"],
            server=c["server"][:n], slot=c["slot"][:n], status=c["status"][:n],
            tokens=c["tokens"][:n])


@dataclass
class Cached:
    events: Growing
    ids: np.ndarray  # int64: the batch ids read, ascending ...
    offsets: np.ndarray  # int64: ... and the row each one starts at
    count: int  # events


_CACHE: dict[int, Cached] = {}


def run_events(run_id: int) -> Cached:
    """Every stored event of the run (without sample and group ids), with its batches."""
    held = _CACHE.pop(run_id, None)
    with connection.cursor() as cur:
        if held is not None and held.ids.size:
            cur.execute("SELECT MIN(id), COALESCE(SUM(n), 0) FROM ingest_eventbatch"
                        " WHERE run_id = %s AND id <= %s", [run_id, int(held.ids[-1])])
            if tuple(cur.fetchone() or ()) != (int(held.ids[0]), held.count):
                held = None  # not what was cached
        last = int(held.ids[-1]) if held is not None and held.ids.size else 0
        cur.execute("SELECT id, n, data FROM ingest_eventbatch WHERE run_id = %s AND id > %s"
                    " ORDER BY id", [run_id, last])
        rows = cur.fetchall()
    if held is None:
        held = Cached(Growing(), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), 0)
    if rows:
        held.events.append(eventstore.decode_each([bytes(r[2]) for r in rows]))
        sizes = np.array([r[1] for r in rows], dtype=np.int64)
        held = Cached(held.events,
                      np.concatenate([held.ids, [r[0] for r in rows]]).astype(np.int64),
                      np.concatenate([held.offsets, held.count + np.cumsum(sizes) - sizes]),
                      held.count + int(sizes.sum()))
    _CACHE[run_id] = held
    while sum(entry.count for entry in _CACHE.values()) > CACHE_EVENTS and len(_CACHE) > 1:
        del _CACHE[next(iter(_CACHE))]
    return held


def forget(run_id: int) -> None:
    _CACHE.pop(run_id, None)


@dataclass
class Computed:
    """A pass's result: the series of `touched` steps (None: of every step) computed from the
    run's events up to batch `batch` at state `version`, `base` the batch the stored series
    were at (what an incremental result adds to), with `lanes` lanes."""

    version: int
    batch: int
    base: int
    lanes: int
    touched: np.ndarray | None
    timings: formulas.StepTimings


def compute(run_id: int) -> Computed | None:
    """The run's timing series when they lag behind its events (only the steps the new
    batches touch when the stored series allow it: ingest.core.timeline_delta), else None."""
    with connection.cursor() as cur:
        cur.execute("SELECT version, done_version, done_batch, done_lanes"
                    " FROM ingest_timelinestate WHERE run_id = %s", [run_id])
        row = cur.fetchone()
    if row is None or row[1] >= row[0]:
        return None
    version, base, base_lanes = int(row[0]), int(row[2]), row[3]
    held = run_events(run_id)
    ev = held.events.table()
    lanes = run_lanes(run_id) or len(held.events.lanes)  # config, else the generations' pairs
    batch = int(held.ids[-1]) if held.ids.size else 0
    found = None
    at = int(np.searchsorted(held.ids, base, side="right"))
    if base and at and held.ids[at - 1] == base and at < held.ids.size and lanes == base_lanes:
        found = affected(ev, int(held.offsets[at]), held.events.rows)
    if found is None:
        timings, touched = formulas.step_series(ev, lanes), None
    else:
        touched, rows = found
        timings = formulas.step_series(eventstore.take(ev, rows), lanes)
    return Computed(version, batch, base, lanes, touched, timings)


def timeline_pass(run_id: int) -> Outcome | None:
    """Recompute and write the run's timeline series if its events changed; the outcome to
    broadcast, or None when there was nothing to do (or the run is gone)."""
    cpu = time.thread_time()
    found = compute(run_id)
    if found is None:
        return None
    computed = time.thread_time()
    created: dict[tuple[int, str], int] = {}
    with transaction.atomic():
        run = lock_run(run_id)
        if run is None:
            return None
        with connection.cursor() as cur:
            cur.execute("SELECT done_version, derived, done_batch FROM ingest_timelinestate"
                        " WHERE run_id = %s", [run_id])
            row = cur.fetchone()
        if row is None or row[0] >= found.version:
            return None  # another pass wrote as much already
        if found.touched is not None and row[2] != found.base:
            return None  # another pass moved the base meanwhile: the next pass starts there
        writer = PointWriter(run, created)
        old = _unpack(bytes(row[1]))
        new = _points(writer, found.timings)
        if found.touched is not None:  # the untouched steps keep their points
            mine = np.isin(new[1], found.touched)
            kept = ~np.isin(old[1], found.touched)
            new = (np.concatenate([old[0][kept], new[0][mine]]),
                   np.concatenate([old[1][kept], new[1][mine]]),
                   np.concatenate([old[2][kept], new[2][mine]]),
                   np.concatenate([old[3][kept], new[3][mine]]))
        _write_changes(writer, old, new)
        with connection.cursor() as cur:
            cur.execute("UPDATE ingest_timelinestate SET done_version = %s, derived = %s,"
                        " done_batch = %s, done_lanes = %s WHERE run_id = %s",
                        [found.version, _pack(new), found.batch, found.lanes, run_id])
        outcome = writer.finish("", run_created=False)
        publish_series_pks(created)
    log.debug("run %s: timeline of %s steps, CPU %.1f ms to compute, %.1f ms to write", run_id,
              "all" if found.touched is None else found.touched.size,
              (computed - cpu) * 1000, (time.thread_time() - computed) * 1000)
    return outcome


Points = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]  # pk, step, time, value


def _points(w: PointWriter, t: formulas.StepTimings) -> Points:
    pks = np.asarray(w.series_pks([(KIND, k, None, None) for k in t.keys]), dtype=np.int64)
    i, j = np.nonzero(~np.isnan(t.values))
    return pks[j], t.steps[i].astype(np.int64), t.times[i].astype(np.float64), t.values[i, j]


def _pack(p: Points) -> bytes:
    pk, step, tm, value = p
    return b"".join([pk.astype("<i8").tobytes(), step.astype("<i8").tobytes(),
                     tm.astype("<f8").tobytes(), value.astype("<f8").tobytes()])


def _unpack(data: bytes) -> Points:
    n = len(data) // 32
    cols = [np.frombuffer(data, dtype=dt, count=n, offset=8 * n * k)
            for k, dt in enumerate(("<i8", "<i8", "<f8", "<f8"))]
    return cols[0], cols[1], cols[2], cols[3]


def _write_changes(w: PointWriter, old: Points, new: Points) -> None:
    """Write the points of `new` that `old` lacks or holds with another value or time, and a
    NaN tombstone for each point of `old` that `new` no longer has."""
    inverse = _pair_codes(np.concatenate([old[0], new[0]]), np.concatenate([old[1], new[1]]))
    oi, ni = inverse[:old[0].size], inverse[old[0].size:]
    m = int(inverse.max(initial=-1)) + 1
    had, has = np.zeros(m, dtype=bool), np.zeros(m, dtype=bool)
    had[oi], has[ni] = True, True
    was_value, was_time = np.full(m, np.nan), np.full(m, np.nan)
    was_value[oi], was_time[oi] = old[3], old[2]
    change = np.flatnonzero(~had[ni] | (was_value[ni] != new[3]) | (was_time[ni] != new[2]))
    gone = np.flatnonzero(~has[oi])
    pk = np.concatenate([new[0][change], old[0][gone]])
    if not pk.size:
        return
    sid_of = dict(Series.objects.filter(pk__in=distinct(pk).tolist())
                  .values_list("pk", "sid"))
    w.add_block(pointstore.Block(pk, np.concatenate([new[1][change], old[1][gone]]),
                                 np.concatenate([new[2][change], old[2][gone]]),
                                 np.concatenate([new[3][change], np.full(gone.size, np.nan)])),
                sid_of)


def _pair_codes(pk: np.ndarray, step: np.ndarray) -> np.ndarray:
    """Each (pk, step) pair's index among the distinct pairs sorted (what `np.unique` of a
    structured array's `return_inverse` gives, by one `lexsort` of two int64 columns: the
    structured array's sort compared field by field in Python-level code, ~10x slower)."""
    if not pk.size:
        return np.zeros(0, dtype=np.int64)
    order = np.lexsort((step, pk))
    p, s = pk[order], step[order]
    first = np.ones(pk.size, dtype=bool)
    first[1:] = (p[1:] != p[:-1]) | (s[1:] != s[:-1])
    inverse = np.empty(pk.size, dtype=np.int64)
    inverse[order] = np.cumsum(first) - 1
    return inverse
