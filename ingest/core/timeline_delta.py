"""Which steps' `timing_*` series can change when events are added to a run, and the rows that
recompute exactly those steps (ingest.core.timeline): so the pipeline's pass over a run of a
million events reads all of them but computes only what they touched.

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
"""

from __future__ import annotations

import numpy as np

from ingest.core.intervals import factorize, label_mask
from ingest.core.timeline import EventTable


def _named(ev: EventTable, name: str) -> np.ndarray:
    return label_mask(ev.names, ev.name, name)


def _from(ev: EventTable, source: str) -> np.ndarray:
    return label_mask(ev.sources, ev.source, source)


def affected(ev: EventTable, new: int) -> tuple[np.ndarray, np.ndarray] | None:
    """For a run's events whose rows from `new` on were just added: (the steps whose series
    may have changed, the rows of `ev` that give those steps' series exactly), or None when
    everything must be recomputed."""
    n = ev.n
    fresh = np.zeros(n, dtype=bool)
    fresh[new:] = True
    span = ~np.isnan(ev.end)
    stepped = ev.step >= 0
    tls = _named(ev, "training_loop_start") & ~span
    if (tls & fresh).any():
        return None
    trainer = _from(ev, "trainer") & stepped
    save = _named(ev, "save_batch") & stepped
    ends = (_named(ev, "generation") | _named(ev, "compute_reward")) & span
    sync = _named(ev, "weight_sync") & span & stepped

    train_steps = factorize(ev.step[trainer])[0]  # sorted distinct (no sort for a small range)
    touched = [np.unique(ev.step[trainer & fresh])]
    touched.append(_next(train_steps, touched[0]))

    # Each save_batch step's time: its earliest save_batch's start.
    rows = np.flatnonzero(save)
    order = rows[np.lexsort((ev.start[rows], ev.step[rows]))]
    firsts = np.ones(order.size, dtype=bool)
    firsts[1:] = ev.step[order][1:] != ev.step[order][:-1]
    save_steps, save_times = ev.step[order][firsts], ev.start[order][firsts]
    if save_times.size > 1 and np.any(np.diff(save_times) <= 0):
        return None  # windows that overlap or are empty: recompute all
    new_saves = np.unique(ev.step[save & fresh])
    touched += [new_saves, _next(save_steps, new_saves)]

    # The window holding a time t: the first save_batch time ≥ t (windows are (prev, cur]).
    fresh_ends = ev.end[new:][ends[new:]]
    window = np.searchsorted(save_times, fresh_ends, side="left")
    touched.append(np.unique(save_steps[window[window < save_times.size]]))
    touched.append(np.unique(ev.step[sync & fresh]))
    steps = np.unique(np.concatenate(touched)).astype(np.int64)

    # The rows those steps are computed from: trainer events of the steps and of their previous
    # trainer steps, every loop start and save_batch, the spans ending in their windows, their
    # weight syncs.
    prev = train_steps[np.searchsorted(train_steps, steps, side="left") - 1][
        np.searchsorted(train_steps, steps, side="left") > 0]
    need = (trainer & np.isin(ev.step, np.concatenate([steps, prev]))) | tls | save
    need |= sync & np.isin(ev.step, steps)
    # ... and the spans ending in their windows: a comparison per window while they are few.
    at = np.searchsorted(save_steps, steps)
    mine = at < save_steps.size
    mine[mine] = save_steps[at[mine]] == steps[mine]
    his = save_times[at[mine]]
    los = np.where(at[mine] > 0, save_times[np.maximum(at[mine] - 1, 0)], -np.inf)
    if his.size <= 16:
        for lo, hi in zip(los.tolist(), his.tolist(), strict=True):
            need |= ends & (ev.end > lo) & (ev.end <= hi)
    else:
        window = np.searchsorted(save_times, ev.end, side="left")
        inside = ends & (window < save_times.size)
        need[inside] |= np.isin(save_steps[window[inside]], steps)
    return steps, np.flatnonzero(need)


def _next(steps: np.ndarray, of: np.ndarray) -> np.ndarray:
    """The step of `steps` (sorted) that follows each of `of`, where there is one."""
    idx = np.searchsorted(steps, of, side="right")
    return steps[idx[idx < steps.size]]
