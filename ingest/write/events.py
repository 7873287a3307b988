"""Store `events` and `gauges` messages: one columnar row per message (ingest.core.eventstore)
and the run's `TimelineState` brought up to date in the same transaction — its event and gauge
extent, the lanes, servers and ranks the Performance buckets divide by, and the version that
tells the pipeline (ingest.pipeline.timeline) to recompute the derived `timing_*` series.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import orjson
from django.db import connection
from django.db.models import F

from ingest.core import eventstore
from ingest.core.commit import PointWriter
from ingest.core.intervals import label_pairs
from ingest.models import TimelineState
from trainer_hooks.wire.schema import Events, Gauges, Labels


def apply_events(w: PointWriter, msg: Events) -> None:
    lo, hi = eventstore.event_bounds(msg)
    with connection.cursor() as cur:
        cur.execute("INSERT INTO ingest_eventbatch (run_id, msg_id, n, t_lo, t_hi, data)"
                    " VALUES (%s, %s, %s, %s, %s, %s)",
                    [w.run.pk, msg.id, msg.n, lo, hi, eventstore.encode_events(msg)])
    state = _state(w.run.pk)
    state.version += 1
    state.events += msg.n
    state.first = lo if state.first is None else min(state.first, lo)
    state.last = hi if state.last is None else max(state.last, hi)
    lanes, servers, ranks = summary(msg)
    state.lanes = _union(state.lanes, lanes)
    state.servers = _union(state.servers, servers)
    state.ranks = _union(state.ranks, ranks)
    _save(state, ["version", "events", "first", "last", "lanes", "servers", "ranks"])
    w.left_out.update(msg.left_out)
    w.dirty = True  # the pipeline recomputes the run's timeline series
    w.timeline = (state.first, state.last)


def apply_gauges(w: PointWriter, msg: Gauges) -> None:
    lo, hi = eventstore.gauge_bounds(msg)
    with connection.cursor() as cur:
        cur.execute("INSERT INTO ingest_gaugebatch (run_id, msg_id, n, t_lo, t_hi, data)"
                    " VALUES (%s, %s, %s, %s, %s, %s)",
                    [w.run.pk, msg.id, msg.n, lo, hi, eventstore.encode_gauges(msg)])
    state = _state(w.run.pk)
    state.gauges += msg.n
    state.gauge_first = lo if state.gauge_first is None else min(state.gauge_first, lo)
    state.gauge_last = hi if state.gauge_last is None else max(state.gauge_last, hi)
    _save(state, ["gauges", "gauge_first", "gauge_last"])
    w.left_out.update(msg.left_out)
    w.timeline = (state.first, state.last)


def touch(run_id: int) -> None:
    """The run's derived timeline series depend on something besides its events (its config's
    `inference_lanes`): recompute them."""
    TimelineState.objects.filter(run_id=run_id).update(version=F("version") + 1)


def _state(run_id: int) -> TimelineState:
    """The run's state row (the run's row is locked: no other writer races for it), without
    the pipeline's fields (its derived points: the pipeline's alone, and large)."""
    state = TimelineState.objects.filter(run_id=run_id).only(*_MINE).first()
    return state if state is not None else TimelineState(run_id=run_id)


_MINE = ("run_id", "version", "events", "first", "last", "lanes", "servers", "ranks", "gauges",
         "gauge_first", "gauge_last")


def _save(state: TimelineState, fields: list[str]) -> None:
    """Write only the fields a message changed (a new row: all of them)."""
    if state._state.adding:
        state.save()
    else:
        state.save(update_fields=fields)


def summary(msg: Events) -> tuple[list[Any], list[Any], list[Any]]:
    """The distinct [server, slot] pairs of the message's generation spans, servers of its
    generation and weight_sync spans, and ranks of its trainer spans (None for null)."""
    span = ~np.isnan(msg.end)
    generation = span & _named(msg.name, "generation")
    sync = span & _named(msg.name, "weight_sync")
    trainer = span & _named(msg.source, "trainer")
    lanes = [list(pair) for pair in label_pairs(msg.server.values, msg.server.codes[generation],
                                                msg.slot[generation])]
    servers = [_label(msg.server, int(c)) for c in np.unique(msg.server.codes[generation | sync])]
    ranks = [None if r < 0 else int(r) for r in np.unique(msg.rank[trainer]).tolist()]
    return lanes, servers, ranks


def _named(labels: Labels, value: str) -> np.ndarray:
    if value not in labels.values:
        return np.zeros(labels.codes.shape, dtype=bool)
    return np.asarray(labels.codes == labels.values.index(value))


def _label(labels: Labels, code: int) -> Any:
    return None if code < 0 else labels.values[code]


def _union(old: list[Any], new: list[Any]) -> list[Any]:
    """`old` with the values of `new` it lacks appended, in a stable, sorted order."""
    seen = {_key(v) for v in old}
    merged = list(old) + [v for v in new if _key(v) not in seen]
    return sorted(merged, key=_key)


def _key(value: Any) -> str:
    """A total order over labels that may be None, ints, strings or [server, slot] pairs."""
    return orjson.dumps(value).decode()
