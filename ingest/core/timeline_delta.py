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
by end (generation and compute_reward spans). A `RowIndex` keeps, as rows are appended (the
pipeline's cached events, ingest.pipeline.timeline), each block's range of those keys: a pass
then reads its new rows and the blocks that may hold what it needs (in a run whose events come
roughly in time order, the recent ones), not every row of the run.
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


class _Zones:
    """A key's range per block of rows over the rows of one kind (a zone map): which blocks
    may hold a row of that kind with a key in given windows. Nothing is sorted or copied; a
    run whose events come roughly in time order keeps each block's range narrow, and a late
    event only widens its own block's."""

    def __init__(self, dtype: type) -> None:
        self.dtype = dtype
        info = np.iinfo(dtype) if np.issubdtype(dtype, np.integer) else None
        self.none = (info.max, info.min) if info else (np.inf, -np.inf)  # a block of none
        self.lo: np.ndarray = np.zeros(0, dtype=dtype)
        self.hi: np.ndarray = np.zeros(0, dtype=dtype)

    def update(self, first: int, keys: np.ndarray, mine: np.ndarray, starts: np.ndarray
               ) -> None:
        """Blocks `first` on, recomputed from their rows' keys and kind (`starts`: each
        block's first row among them)."""
        if not starts.size:
            return
        lo: np.ndarray = np.minimum.reduceat(
            np.where(mine, keys, self.none[0]).astype(self.dtype), starts)
        hi: np.ndarray = np.maximum.reduceat(
            np.where(mine, keys, self.none[1]).astype(self.dtype), starts)
        self.lo = np.concatenate([self.lo[:first], lo])
        self.hi = np.concatenate([self.hi[:first], hi])

    def blocks(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """The blocks whose range meets some window lo < key ≤ hi (windows disjoint, in
        ascending order)."""
        if not lo.size:
            return np.zeros(0, dtype=np.int64)
        at = np.searchsorted(hi, self.lo, side="left")  # the first window ending at or after
        meet = at < hi.size
        meet[meet] = lo[at[meet]] < self.hi[meet]
        return np.flatnonzero(meet)


def _ranges(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """starts[0]..ends[0]-1, starts[1]..ends[1]-1, ... joined, without a loop per range."""
    lengths = np.maximum(ends - starts, 0)
    total = int(lengths.sum())
    if not total:
        return np.zeros(0, dtype=np.int64)
    firsts = np.cumsum(lengths) - lengths
    out: np.ndarray = np.arange(total, dtype=np.int64) + np.repeat(starts - firsts, lengths)
    return out


def _in_windows(keys: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Which keys lie in some window lo < key ≤ hi (windows disjoint, ascending)."""
    if lo.size <= 8:  # a comparison per window while they are few
        inside = np.zeros(keys.shape, dtype=bool)
        for a, b in zip(lo.tolist(), hi.tolist(), strict=True):
            inside |= (keys > a) & (keys <= b)
        return inside
    at = np.searchsorted(hi, keys, side="left")
    inside = at < hi.size
    inside[inside] = keys[inside] > lo[at[inside]]
    return inside


class RowIndex:
    """A run's rows as `affected` reads them, kept up to date as rows are appended: per
    block of BLOCK rows the range of the steps of its trainer events and of its weight syncs
    and of the ends of its generation and compute_reward spans (zone maps), the rows of loop
    starts and save_batches, and the distinct steps with trainer events. A query reads the
    rows of the blocks whose range meets it, and keeps exactly the rows it asks for."""

    BLOCK = 8192

    def __init__(self, block: int = BLOCK) -> None:
        self.block = block
        self.n = 0
        self.trainer = _Zones(np.int64)
        self.sync = _Zones(np.int64)
        self.ends = _Zones(np.float64)
        self._tls: list[np.ndarray] = []
        self._save: list[np.ndarray] = []
        self.train_steps = np.zeros(0, dtype=np.int64)

    def add(self, ev: EventTable) -> None:
        """Take in the rows of `ev` from the last one taken on (`ev`: the run's events so far,
        the rows before those the same as last time)."""
        lo, hi = self.n, ev.n
        if hi <= lo:
            return
        first = lo // self.block  # a partial last block is recomputed with the new rows
        a = first * self.block
        k = _kinds(ev, a, hi)
        starts = np.arange(0, hi - a, self.block)
        step = ev.step[a:hi]
        self.trainer.update(first, step, k.trainer, starts)
        self.sync.update(first, step, k.sync, starts)
        self.ends.update(first, ev.end[a:hi], k.ends, starts)
        new = slice(lo - a, hi - a)
        rows = np.arange(lo, hi, dtype=np.int64)
        self._tls.append(rows[k.tls[new]])
        self._save.append(rows[k.save[new]])
        self.train_steps = distinct(np.concatenate([self.train_steps, step[new][k.trainer[new]]]))
        self.n = hi

    def rows_of(self, zones: _Zones, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """The rows of the blocks `zones` says may hold a key in the windows (lo, hi]."""
        blocks = zones.blocks(lo, hi) * self.block
        return _ranges(blocks, np.minimum(blocks + self.block, self.n))

    def trainer_rows(self, ev: EventTable, steps: np.ndarray) -> np.ndarray:
        """Rows of trainer events (with a step) of `steps` (sorted, distinct)."""
        rows = self.rows_of(self.trainer, steps - 1, steps)
        rows = rows[label_mask(ev.sources, ev.source[rows], "trainer")]
        found: np.ndarray = rows[_in_windows(ev.step[rows], steps - 1, steps)]
        return found

    def sync_rows(self, ev: EventTable, steps: np.ndarray) -> np.ndarray:
        """Rows of weight_sync spans of `steps` (sorted, distinct)."""
        rows = self.rows_of(self.sync, steps - 1, steps)
        rows = rows[label_mask(ev.names, ev.name[rows], "weight_sync") & ~np.isnan(ev.end[rows])]
        found: np.ndarray = rows[_in_windows(ev.step[rows], steps - 1, steps)]
        return found

    def end_rows(self, ev: EventTable, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Rows of generation and compute_reward spans ending in a window (lo, hi]."""
        rows = self.rows_of(self.ends, lo, hi)
        name = ev.name[rows]
        keep = label_mask(ev.names, name, "generation") | label_mask(ev.names, name,
                                                                      "compute_reward")
        rows = rows[keep]
        found: np.ndarray = rows[_in_windows(ev.end[rows], lo, hi)]  # (NaN: in no window)
        return found

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
    wanted = distinct(np.concatenate([steps, prev]))
    need = [index.trainer_rows(ev, wanted), index.tls, saves, index.sync_rows(ev, steps)]
    at = np.searchsorted(save_steps, steps)
    mine = at < save_steps.size
    mine[mine] = save_steps[at[mine]] == steps[mine]
    his = save_times[at[mine]]
    los = np.where(at[mine] > 0, save_times[np.maximum(at[mine] - 1, 0)], -np.inf)
    need.append(index.end_rows(ev, los, his))
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
