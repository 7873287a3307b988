"""Which steps' `timing_*` series can change when events are added to a run, and the rows that
recompute exactly those steps (ingest.core.timeline): so the pipeline's pass over a run of a
million events recomputes only what the new events touched.

Pure: numpy only. Each per-step series of ingest.core.timeline depends on few things: the
trainer events of its step and of the previous step with trainer events (end_prev), the run's
earliest `training_loop_start`, the step's `save_batch` and the previous one (its inference
window), the generation and compute_reward spans ending in that window, the step's weight
syncs, and the run's lane count. So new events touch:

- their trainer steps, and the next trainer step after each (its end_prev may move);
- their save_batch steps, and the next save_batch step after each (its window starts there);
- the steps whose windows hold the ends of their generation and compute_reward spans;
- their weight_sync steps.

A new `training_loop_start`, save_batch times that do not rise with the step (windows that
overlap), or a changed lane count touch everything: `affected` answers None (recompute all).

Finding the rows needs the run's rows of each kind by step (trainer events, weight syncs) or
by end (generation and compute_reward spans). A `RowIndex` keeps them as rows are appended (the
pipeline's cached events, ingest.pipeline.timeline): a pass then costs what its new rows and
the rows it returns cost, and a binary search per kept chunk, not a scan of every row.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ingest.core.intervals import distinct, label_mask
from ingest.core.timeline import EventTable


@dataclass
class _Kinds:
    """The rows of a slice of a table by what `affected` looks at (masks over the slice)."""

    tls: np.ndarray  # training_loop_start instants
    trainer: np.ndarray  # trainer events with a step
    save: np.ndarray  # save_batch events with a step
    ends: np.ndarray  # generation and compute_reward spans
    sync: np.ndarray  # weight_sync spans with a step


def _kinds(ev: EventTable, lo: int, hi: int) -> _Kinds:
    rows = slice(lo, hi)
    name = ev.name[rows]

    def named(label: str) -> np.ndarray:
        return label_mask(ev.names, name, label)

    span = ~np.isnan(ev.end[rows])
    stepped = ev.step[rows] >= 0
    return _Kinds(
        tls=named("training_loop_start") & ~span,
        trainer=label_mask(ev.sources, ev.source[rows], "trainer") & stepped,
        save=named("save_batch") & stepped,
        ends=(named("generation") | named("compute_reward")) & span,
        sync=named("weight_sync") & span & stepped)


class _Keyed:
    """Rows of one kind ordered by a key (a step, an end time), as sorted chunks: a chunk per
    append, the last two merged while the older is no larger (a binary counter: O(log n)
    chunks, each row merged O(log n) times). Within a chunk rows are in (key, row) order."""

    def __init__(self, dtype: type) -> None:
        self.dtype = dtype
        self.keys: list[np.ndarray] = []
        self.rows: list[np.ndarray] = []

    def add(self, keys: np.ndarray, rows: np.ndarray) -> None:
        """Append rows (ascending, after every row held) with their keys."""
        if not rows.size:
            return
        order = np.argsort(keys, kind="stable")
        self.keys.append(np.asarray(keys[order], dtype=self.dtype))
        self.rows.append(np.asarray(rows[order], dtype=np.int64))
        while len(self.keys) > 1 and self.keys[-2].size <= self.keys[-1].size:
            newer_keys, newer_rows = self.keys.pop(), self.rows.pop()
            older_keys, older_rows = self.keys.pop(), self.rows.pop()
            # the newer rows come after the older ones of an equal key: (key, row) order kept
            at = np.searchsorted(older_keys, newer_keys, side="right") + np.arange(
                newer_keys.size)
            keys_out: np.ndarray = np.empty(older_keys.size + newer_keys.size, dtype=self.dtype)
            rows_out = np.empty(keys_out.size, dtype=np.int64)
            older = np.ones(keys_out.size, dtype=bool)
            older[at] = False
            keys_out[older], keys_out[at] = older_keys, newer_keys
            rows_out[older], rows_out[at] = older_rows, newer_rows
            self.keys.append(keys_out)
            self.rows.append(rows_out)

    def within(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """The rows whose key k lies in some window lo < k ≤ hi (windows disjoint)."""
        found = [np.zeros(0, dtype=np.int64)]
        for keys, rows in zip(self.keys, self.rows, strict=True):
            a = np.searchsorted(keys, lo, side="right")
            b = np.searchsorted(keys, hi, side="right")
            found.append(_slices(rows, a, b))
        return np.concatenate(found)


def _slices(values: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """values[a[0]:b[0]], values[a[1]:b[1]], ... joined, without a loop per slice."""
    lengths = np.maximum(b - a, 0)
    total = int(lengths.sum())
    if not total:
        return np.zeros(0, dtype=values.dtype)
    firsts = np.cumsum(lengths) - lengths
    out: np.ndarray = values[np.arange(total) + np.repeat(a - firsts, lengths)]
    return out


class RowIndex:
    """A run's rows as `affected` reads them, kept up to date as rows are appended: trainer
    events and weight syncs by step, generation and compute_reward spans by end, the rows of
    loop starts and save_batches, and the distinct steps with trainer events."""

    def __init__(self) -> None:
        self.n = 0
        self.trainer = _Keyed(np.int64)
        self.sync = _Keyed(np.int64)
        self.ends = _Keyed(np.float64)
        self._tls: list[np.ndarray] = []
        self._save: list[np.ndarray] = []
        self.train_steps = np.zeros(0, dtype=np.int64)

    def add(self, ev: EventTable) -> None:
        """Take in the rows of `ev` from the last one taken on (`ev`: the run's events so far,
        the rows before those the same as last time)."""
        lo, hi = self.n, ev.n
        if hi <= lo:
            return
        k = _kinds(ev, lo, hi)
        rows = np.arange(lo, hi, dtype=np.int64)
        step = ev.step[lo:hi]
        self.trainer.add(step[k.trainer], rows[k.trainer])
        self.sync.add(step[k.sync], rows[k.sync])
        self.ends.add(ev.end[lo:hi][k.ends], rows[k.ends])
        self._tls.append(rows[k.tls])
        self._save.append(rows[k.save])
        self.train_steps = distinct(np.concatenate([self.train_steps, step[k.trainer]]))
        self.n = hi

    @property
    def tls(self) -> np.ndarray:
        self._tls = [np.concatenate(self._tls)] if self._tls else []
        return self._tls[0] if self._tls else np.zeros(0, dtype=np.int64)

    @property
    def save(self) -> np.ndarray:
        self._save = [np.concatenate(self._save)] if self._save else []
        return self._save[0] if self._save else np.zeros(0, dtype=np.int64)


def affected(ev: EventTable, new: int, index: RowIndex | None = None
             ) -> tuple[np.ndarray, np.ndarray] | None:
    """For a run's events whose rows from `new` on were just added: (the steps whose series
    may have changed, the rows of `ev` that give those steps' series exactly, ascending), or
    None when everything must be recomputed. `index`: the table's `RowIndex`, holding every
    row of it (else one is built here, a pass over every row)."""
    if index is None:
        index = RowIndex()
        index.add(ev)
    if index.n != ev.n:
        raise ValueError(f"the index holds {index.n} rows, the table {ev.n}")
    fresh = _kinds(ev, new, ev.n)
    if fresh.tls.any():
        return None
    step = ev.step[new:]
    train_steps = index.train_steps  # sorted distinct
    touched = [distinct(step[fresh.trainer])]
    touched.append(_next(train_steps, touched[0]))

    # Each save_batch step's time: its earliest save_batch's start.
    saves = index.save
    order = saves[np.lexsort((ev.start[saves], ev.step[saves]))]
    firsts = np.ones(order.size, dtype=bool)
    firsts[1:] = ev.step[order][1:] != ev.step[order][:-1]
    save_steps, save_times = ev.step[order][firsts], ev.start[order][firsts]
    if save_times.size > 1 and np.any(np.diff(save_times) <= 0):
        return None  # windows that overlap or are empty: recompute all
    new_saves = distinct(step[fresh.save])
    touched += [new_saves, _next(save_steps, new_saves)]

    # The window holding a time t: the first save_batch time ≥ t (windows are (prev, cur]).
    fresh_ends = ev.end[new:][fresh.ends]
    window = np.searchsorted(save_times, fresh_ends, side="left")
    touched.append(distinct(save_steps[window[window < save_times.size]]))
    touched.append(distinct(step[fresh.sync]))
    steps = distinct(np.concatenate(touched)).astype(np.int64)

    # The rows those steps are computed from: trainer events of the steps and of their previous
    # trainer steps, every loop start and save_batch, the spans ending in their windows, their
    # weight syncs.
    at = np.searchsorted(train_steps, steps, side="left")
    prev = train_steps[at[at > 0] - 1]
    wanted = np.union1d(steps, prev)
    need = [index.trainer.within(wanted - 1, wanted), index.tls, saves,
            index.sync.within(steps - 1, steps)]
    at = np.searchsorted(save_steps, steps)
    mine = at < save_steps.size
    mine[mine] = save_steps[at[mine]] == steps[mine]
    his = save_times[at[mine]]
    los = np.where(at[mine] > 0, save_times[np.maximum(at[mine] - 1, 0)], -np.inf)
    need.append(index.ends.within(los, his))
    return steps, _rows(np.concatenate(need), ev.n)


def _rows(rows: np.ndarray, n: int) -> np.ndarray:
    """The distinct rows of `rows` (each < n), ascending: a mask over the table's rows when
    they are many, else a sort."""
    if rows.size * 16 < n:
        return distinct(rows)
    mask = np.zeros(n, dtype=bool)
    mask[rows] = True
    return np.flatnonzero(mask)


def _next(steps: np.ndarray, of: np.ndarray) -> np.ndarray:
    """The step of `steps` (sorted) that follows each of `of`, where there is one."""
    idx = np.searchsorted(steps, of, side="right")
    return steps[idx[idx < steps.size]]
