"""Reads of where the time goes (docs/protocol.md "HTTP endpoints"): a window of a run's events
(columnar, or as a Chrome trace), the Performance page's time buckets computed over the window
from its events (ingest.core.timeline: the bucket size is the reader's choice, so buckets are
not stored), and the run's gauges.

Only the stored batches that overlap the window are loaded (`t_hi ≥ start`, `t_lo < end`,
indexed by run and t_hi), decoded together and filtered with numpy.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from django.db import connection

from ingest.core import eventstore
from ingest.core import timeline as formulas
from ingest.core.intervals import factorize, label_mask
from ingest.models import Run, TimelineState
from ingest.reads.downsample import downsample

DEFAULT_LIMIT = 200_000
MAX_LIMIT = 1_000_000
DEFAULT_BUCKET = 60.0
MIN_BUCKET = 0.001
MAX_BUCKETS = 100_000


class ReadError(ValueError):
    """A bad parameter: its name and why (answered as HTTP 400)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field, self.message = field, message


def state(run_id: int) -> TimelineState | None:
    """The run's timeline state (None: it has sent no events or gauges); Run.DoesNotExist
    when there is no such run."""
    found = TimelineState.objects.filter(run_id=run_id).defer("derived").first()
    if found is None and not Run.objects.filter(pk=run_id).exists():
        raise Run.DoesNotExist(run_id)
    return found


def _window(start: float | None, end: float | None) -> tuple[float, float]:
    lo = -math.inf if start is None else start
    hi = math.inf if end is None else end
    if lo >= hi:
        raise ReadError("end", "end must be after start")
    return lo, hi


def _load_events(run_id: int, lo: float, hi: float) -> formulas.EventTable:
    with connection.cursor() as cur:
        cur.execute("SELECT data FROM ingest_eventbatch WHERE run_id = %s AND t_hi >= %s"
                    " AND t_lo < %s ORDER BY id", [run_id, _finite(lo), _finite(hi)])
        blobs = [bytes(row[0]) for row in cur.fetchall()]
    return eventstore.window(eventstore.decode_events(blobs), lo, hi)


def _finite(t: float) -> float:
    """A bound the databases take (they have no infinite floats in a parameter)."""
    return max(min(t, 1e300), -1e300)


def events(run_id: int, start: float | None, end: float | None, source: str | None,
           limit: int | None) -> dict[str, Any]:
    """Every event of the run overlapping [start, end), in start order (at most `limit`:
    `truncated` says more were there), the lanes they occupy and the run's event extent."""
    limit = DEFAULT_LIMIT if limit is None else limit
    if not 1 <= limit <= MAX_LIMIT:
        raise ReadError("limit", f"limit must be between 1 and {MAX_LIMIT}")
    st = state(run_id)
    lo, hi = _window(start, end)
    ev = _load_events(run_id, lo, hi) if st is not None and st.events else None
    if ev is not None and source:
        ev = eventstore.take(ev, np.flatnonzero(label_mask(ev.sources, ev.source, source)))
    truncated = False
    if ev is not None:
        order = np.argsort(ev.start, kind="stable")
        truncated = order.size > limit
        ev = eventstore.take(ev, order[:limit])
    extent = [st.first, st.last] if st is not None else [None, None]
    if ev is None or not ev.n:
        return {"events": eventstore.to_columns(eventstore.decode_events([])), "lanes": [],
                "truncated": False, "extent": extent}
    return {"events": eventstore.to_columns(ev), "lanes": lanes(ev), "truncated": truncated,
            "extent": extent}


def lanes(ev: formulas.EventTable) -> list[dict[str, Any]]:
    """The distinct (source, rank, server, slot) of the events, sorted."""
    cols = [ev.source.astype(np.int64), ev.rank, ev.server.astype(np.int64), ev.slot]
    key = np.zeros(ev.n, dtype=np.int64)
    for col in cols:  # one dense key of the four (factorized: no sort of the rows)
        values, code = factorize(col)
        key = key * values.size + code
    first = np.unique(key, return_index=True)[1] if key.size else np.zeros(0, dtype=np.intp)
    distinct = np.stack(cols)[:, first].T.tolist()
    out = [{"source": ev.sources[s], "rank": None if r < 0 else r,
            "server": None if v < 0 else ev.servers[v], "slot": None if k < 0 else k}
           for s, r, v, k in distinct]
    return sorted(out, key=lambda lane: (lane["source"], _order(lane["rank"]),
                                         _order(lane["server"]), _order(lane["slot"])))


def _order(value: Any) -> tuple[int, Any]:
    if value is None:
        return (0, 0)
    return (1, value) if isinstance(value, int) else (2, str(value))


def trace(run_id: int, start: float | None, end: float | None) -> dict[str, Any]:
    """The window in the Chrome Trace Event format (Perfetto, chrome://tracing): a process
    per source, a thread per lane (trainer rank, inference server and slot), spans as complete
    events and instants as instant events, times in microseconds."""
    found = events(run_id, start, end, None, MAX_LIMIT)
    cols = found["events"]
    lane_ids: dict[tuple[Any, ...], int] = {}
    pids = {src: i + 1 for i, src in enumerate(sorted(set(cols["source"])))}
    meta: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": src}}
        for src, pid in pids.items()]
    out: list[dict[str, Any]] = []
    for name, t0, t1, src, step, rank, server, slot, status, tokens, sid, gid in zip(
            cols["name"], cols["start"], cols["end"], cols["source"], cols["step"],
            cols["rank"], cols["server"], cols["slot"], cols["status"], cols["tokens"],
            cols["sample_id"], cols["group_id"], strict=True):
        lane = (src, rank, server, slot)
        tid = lane_ids.get(lane)
        if tid is None:
            tid = lane_ids[lane] = len(lane_ids) + 1
            meta.append({"ph": "M", "name": "thread_name", "pid": pids[src], "tid": tid,
                         "args": {"name": _lane_name(rank, server, slot, src)}})
        args = {k: v for k, v in (("step", step), ("status", status), ("tokens", tokens),
                                  ("sample_id", sid), ("group_id", gid)) if v is not None}
        item: dict[str, Any] = {"name": name, "pid": pids[src], "tid": tid,
                                "ts": round(t0 * 1e6, 3), "args": args}
        if t1 is None:
            item.update(ph="i", s="t")
        else:
            item.update(ph="X", dur=round((t1 - t0) * 1e6, 3))
        out.append(item)
    return {"traceEvents": meta + out, "displayTimeUnit": "ms",
            "otherData": {"run": run_id, "truncated": found["truncated"]}}


def _lane_name(rank: Any, server: Any, slot: Any, source: str) -> str:
    if rank is not None:
        return f"rank {rank}"
    if server is not None:
        return f"server {server}" + ("" if slot is None else f" · slot {slot}")
    return source


def performance(run_id: int, bucket: float | None, start: float | None,
                end: float | None) -> dict[str, Any]:
    """The time buckets of docs/protocol.md `/performance` over [start, end) (default: the
    run's events from first to last)."""
    b = DEFAULT_BUCKET if bucket is None else bucket
    if not (math.isfinite(b) and b >= MIN_BUCKET):
        raise ReadError("bucket", f"bucket must be a number of seconds ≥ {MIN_BUCKET}")
    st = state(run_id)
    empty = {"bucket": b, "time": [], "partial": [],
             "series": {name: [] for name in formulas.BUCKET_SERIES}}
    if st is None or st.first is None or st.last is None:
        return empty
    lo = st.first if start is None else start
    hi = np.nextafter(st.last, math.inf) if end is None else end
    if lo >= hi:
        raise ReadError("end", "end must be after start")
    if (hi - lo) / b > MAX_BUCKETS:
        raise ReadError("bucket", f"{math.ceil((hi - lo) / b)} buckets; at most {MAX_BUCKETS}:"
                        " choose a larger bucket or a shorter window")
    # Buckets are whole: the events of every bucket that meets [lo, hi), edge to edge.
    ev = _load_events(run_id, math.floor(lo / b) * b, math.ceil(hi / b) * b)
    run_config = Run.objects.filter(pk=run_id).values_list("config", flat=True).first()
    lanes_given = configured_lanes(run_config)
    found = formulas.buckets(ev, b, lo, hi, lanes=lanes_given or len(st.lanes),
                             servers=len(st.servers), ranks=len(st.ranks), latest=st.last)
    return {"bucket": b, "time": found.time, "partial": found.partial,
            "series": {k: _nulls(v) for k, v in found.series.items()}}


def configured_lanes(config: Any) -> int | None:
    """The run config's `inference_lanes` when it is a positive integer: the lanes the
    generation percentages divide by (else the distinct server and slot pairs seen)."""
    lanes_ = config.get("inference_lanes") if isinstance(config, dict) else None
    return lanes_ if isinstance(lanes_, int) and not isinstance(lanes_, bool) and lanes_ > 0 \
        else None


def _nulls(values: np.ndarray) -> list[float | None]:
    out: list[float | None] = values.tolist()
    if np.isnan(values).any():
        return [None if v != v else v for v in out]
    return out


def gauges(run_id: int, names: list[str] | None, host: str | None, start: float | None,
           end: float | None, max_points: int) -> dict[str, Any]:
    """The run's gauges in [start, end): per name, one series per (host, device), in time
    order, downsampled to `max_points` (extremes kept) where longer."""
    st = state(run_id)
    lo, hi = _window(start, end)
    out: dict[str, list[dict[str, Any]]] = {}
    if st is None or not st.gauges:
        return {"gauges": out}
    with connection.cursor() as cur:
        cur.execute("SELECT data FROM ingest_gaugebatch WHERE run_id = %s AND t_hi >= %s"
                    " AND t_lo < %s ORDER BY id", [run_id, _finite(lo), _finite(hi)])
        blobs = [bytes(row[0]) for row in cur.fetchall()]
    g = eventstore.decode_gauges(blobs)
    keep = (g.time >= lo) & (g.time < hi)
    if names:
        keep &= np.isin(g.name, [g.names.index(n) for n in names if n in g.names])
    if host is not None:
        keep &= g.host == (g.hosts.index(host) if host in g.hosts else -2)
    rows = np.flatnonzero(keep)
    order = rows[np.lexsort((g.time[rows], g.device[rows], g.host[rows], g.name[rows]))]
    key = np.stack([g.name[order], g.host[order], g.device[order]]).astype(np.int64)
    cuts = np.flatnonzero(np.any(key[:, 1:] != key[:, :-1], axis=0)) + 1
    for a, b in zip([0, *cuts.tolist()], [*cuts.tolist(), order.size], strict=True):
        if a == b:
            continue
        idx = order[a:b]
        t, v = g.time[idx], g.value[idx]
        name_code, host_code, dev_code = (int(x) for x in key[:, a])
        entry = _series(t, v, max_points)
        entry["host"] = None if host_code < 0 else g.hosts[host_code]
        entry["device"] = None if dev_code < 0 else g.devices[dev_code]
        out.setdefault(g.names[name_code], []).append(entry)
    return {"gauges": out}


def _series(t: np.ndarray, v: np.ndarray, max_points: int) -> dict[str, Any]:
    if t.size <= max_points:
        return {"time": t, "value": _nulls(v), "downsampled": False}
    known = ~np.isnan(v)  # nulls are gaps: a reduced line leaves them out
    t, v = t[known], v[known]
    if t.size <= max_points:
        return {"time": t, "value": v, "downsampled": True}
    found = downsample(t, t, v, max_points)
    return {"time": found["time"], "value": found["value"], "downsampled": True,
            "bucket_min": found["bucket_min"], "bucket_max": found["bucket_max"]}
