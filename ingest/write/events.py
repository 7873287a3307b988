"""Store `events` and `gauges` messages: one columnar row per message (ingest.core.eventstore)
and the run's `TimelineState` brought up to date in the same transaction — its event and gauge
extent, the lanes, servers and ranks the Performance buckets divide by, and the version that
tells the pipeline (ingest.pipeline.timeline) to recompute the derived `timing_*` series.
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np
import orjson
from django.db import connection
from django.db.models import F, Field, JSONField

from ingest.core import eventstore
from ingest.core.commit import PointWriter
from ingest.core.intervals import distinct, label_pairs
from ingest.models import TimelineState
from trainer_hooks.wire.schema import Events, Gauges, Labels


def apply_events(w: PointWriter, msg: Events) -> None:
    lo, hi = eventstore.event_bounds(msg)
    with connection.cursor() as cur:
        cur.execute("INSERT INTO ingest_eventbatch (run_id, msg_id, n, t_lo, t_hi, data)"
                    " VALUES (%s, %s, %s, %s, %s, %s)",
                    [w.run.pk, msg.id, msg.n, lo, hi, eventstore.encode_events(msg)])
    state = _state(w.run.pk)
    lanes, servers, ranks = summary(msg)
    changed = {
        "version": state["version"] + 1,
        "events": state["events"] + msg.n,
        "first": lo if state["first"] is None else min(state["first"], lo),
        "last": hi if state["last"] is None else max(state["last"], hi),
    }
    for name, new in (("lanes", lanes), ("servers", servers), ("ranks", ranks)):
        merged = _union(state[name], new)
        if merged != state[name]:
            changed[name] = merged
    _save(w.run.pk, state, changed)
    w.left_out.update(msg.left_out)
    w.dirty = True  # the pipeline recomputes the run's timeline series
    w.timeline = (changed["first"], changed["last"])


def apply_gauges(w: PointWriter, msg: Gauges) -> None:
    lo, hi = eventstore.gauge_bounds(msg)
    with connection.cursor() as cur:
        cur.execute("INSERT INTO ingest_gaugebatch (run_id, msg_id, n, t_lo, t_hi, data)"
                    " VALUES (%s, %s, %s, %s, %s, %s)",
                    [w.run.pk, msg.id, msg.n, lo, hi, eventstore.encode_gauges(msg)])
    state = _state(w.run.pk)
    _save(w.run.pk, state, {
        "gauges": state["gauges"] + msg.n,
        "gauge_first": lo if state["gauge_first"] is None else min(state["gauge_first"], lo),
        "gauge_last": hi if state["gauge_last"] is None else max(state["gauge_last"], hi),
    })
    w.left_out.update(msg.left_out)
    w.timeline = (state["first"], state["last"])


def touch(run_id: int) -> None:
    """The run's derived timeline series depend on something besides its events (its config's
    `inference_lanes`): recompute them."""
    TimelineState.objects.filter(run_id=run_id).update(version=F("version") + 1)


def _state(run_id: int) -> dict[str, Any]:
    """The run's state row as {field: value} (the run's row is locked: no other writer races
    for it), without the pipeline's fields (its derived points: the pipeline's alone, and
    large); the defaults of a new row when it has none ("new": True). One plain SELECT: the
    ORM's query building cost more than the rest of a message's bookkeeping."""
    with connection.cursor() as cur:
        cur.execute(_SELECT, [run_id])
        row = cur.fetchone()
    if row is None:
        fresh = TimelineState(run_id=run_id)
        return {"new": True, **{f.name: getattr(fresh, f.attname) for f in _FIELDS}}
    return {"new": False, **{f.name: f.from_db_value(v, None, connection)  # type: ignore[arg-type]
                             if isinstance(f, JSONField) else v
                             for f, v in zip(_FIELDS, row, strict=True)}}


def _save(run_id: int, state: dict[str, Any], changed: dict[str, Any]) -> None:
    """Write the fields a message changed (a new row: all of them, through the model)."""
    if state["new"]:
        fresh = TimelineState(run_id=run_id)
        for name, value in changed.items():
            setattr(fresh, name, value)
        fresh.save()
        return
    fields = [_field(name) for name in changed]
    sets = ", ".join(f"{connection.ops.quote_name(str(f.column))} = %s" for f in fields)
    with connection.cursor() as cur:
        cur.execute(f"UPDATE {_TABLE} SET {sets} WHERE run_id = %s",
                    [f.get_db_prep_save(changed[f.name], connection) for f in fields]
                    + [run_id])


_MINE = ("version", "events", "first", "last", "lanes", "servers", "ranks", "gauges",
         "gauge_first", "gauge_last")


def _field(name: str) -> Field[Any, Any]:
    return cast("Field[Any, Any]", TimelineState._meta.get_field(name))


_FIELDS = [_field(name) for name in _MINE]
_TABLE = connection.ops.quote_name(TimelineState._meta.db_table)
_SELECT = (f"SELECT {', '.join(connection.ops.quote_name(str(f.column)) for f in _FIELDS)} "
           f"FROM {_TABLE} WHERE run_id = %s")


def summary(msg: Events) -> tuple[list[Any], list[Any], list[Any]]:
    """The distinct [server, slot] pairs of the message's generation spans, servers of its
    generation and weight_sync spans, and ranks of its trainer spans (None for null)."""
    span = ~np.isnan(msg.end)
    generation = span & _named(msg.name, "generation")
    sync = span & _named(msg.name, "weight_sync")
    trainer = span & _named(msg.source, "trainer")
    lanes = [list(pair) for pair in label_pairs(msg.server.values, msg.server.codes[generation],
                                                msg.slot[generation])]
    servers = [_label(msg.server, int(c)) for c in distinct(msg.server.codes[generation | sync])]
    ranks = [None if r < 0 else int(r) for r in distinct(msg.rank[trainer]).tolist()]
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
