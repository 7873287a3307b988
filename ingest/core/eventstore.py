"""Compact storage of `events` and `gauges` messages, and their reading back as tables.

A stored row is one blob per message: a msgpack map of little-endian numpy columns (floats as
float64, an all-NaN one left out; integers and label codes in the narrowest integer type that
holds them, an all-null one left out) and the label lists (the distinct names, sources,
servers: integers as int64 bytes, strings as a list), that part zstd-compressed when it pays
(format 2; format 1, still read, used zlib), and the sample and group ids the same way apart
(the formulas never decode them). Decoding many blobs concatenates them into one `EventTable`
(or `GaugeTable`), merging the label lists: each blob's codes are remapped through one small
table, not row by row. The sample and group ids' lists are joined, not merged (an id in two
blobs is listed twice; a row's code still gives its id): ids are mostly distinct, and merging
them went through a dict one id at a time.

Pure: numpy and msgpack; no Django. The timeline's formulas (ingest.core.timeline) and the
read API (`/events`, `/performance`, `/gauges`) work on what `decode_events` returns.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Any

import msgpack
import numpy as np

from ingest.core import zstd
from ingest.core.intervals import factorize
from ingest.core.timeline import EventTable
from trainer_hooks.wire.schema import EVENT_STATUSES, Events, Gauges, Labels

FORMAT = 2  # what is written
_READS = (1, 2)  # what is read: 1 compressed the label lists with zlib, 2 with zstd
_INT_TYPES = ("<i1", "<i2", "<i4", "<i8")
_SQUEEZE_MIN = 256  # label bytes below which compressing never pays
# How a blob's label lists are stored ("z", "zi"): False/0 as packed, True/1 zlib (format 1),
# 2 zstd level 1 (format 2: ~4x faster than zlib level 1 and smaller, on 4,096 sample ids).
_PLAIN, _ZLIB, _ZSTD = 0, 1, 2

# Columns by kind: (message field, table field, table list field for labels).
_EVENT_FLOATS = ("start", "end")
_EVENT_INTS = ("step", "rank", "slot", "tokens", "status")
_EVENT_LABELS = (("name", "names"), ("source", "sources"), ("server", "servers"),
                 ("sample_id", "sample_ids"), ("group_id", "group_ids"))
_ID_LABELS = ("sample_id", "group_id")  # stored apart from the other labels
_GAUGE_FLOATS = ("time", "value")
_GAUGE_LABELS = (("name", "names"), ("host", "hosts"), ("device", "devices"))


@dataclass
class GaugeTable:
    """Gauge points of a run, columnar: label columns are int32 codes into their lists (-1 =
    null); `value` NaN = null."""

    time: np.ndarray  # float64
    names: list[str]
    name: np.ndarray  # int32
    value: np.ndarray  # float64
    hosts: list[str | int]
    host: np.ndarray  # int32
    devices: list[str | int]
    device: np.ndarray  # int32

    @property
    def n(self) -> int:
        return int(self.time.shape[0])


# A label column as one blob holds it: its integer labels, its string labels, and codes into
# the two lists joined (integers first); -1 = null.
_Part = tuple[np.ndarray, list[str], np.ndarray]


# ---------------------------------------------------------------- encoding


def encode_events(msg: Events) -> bytes:
    """One `events` message as a stored blob."""
    return _encode(msg.n, {c: getattr(msg, c) for c in _EVENT_FLOATS},
                   {c: getattr(msg, c) for c in _EVENT_INTS},
                   {c: getattr(msg, c) for c, _ in _EVENT_LABELS})


def encode_gauges(msg: Gauges) -> bytes:
    """One `gauges` message as a stored blob."""
    return _encode(msg.n, {c: getattr(msg, c) for c in _GAUGE_FLOATS}, {},
                   {c: getattr(msg, c) for c, _ in _GAUGE_LABELS})


def event_bounds(msg: Events) -> tuple[float, float]:
    """(earliest start, latest end or instant) of a message: its stored row's time range."""
    if msg.n == 0:
        raise ValueError("events: a message without rows has no time range")
    return float(np.min(msg.start)), float(np.max(np.fmax(msg.end, msg.start)))


def gauge_bounds(msg: Gauges) -> tuple[float, float]:
    """(earliest, latest) point time of a message."""
    if msg.n == 0:
        raise ValueError("gauges: a message without rows has no time range")
    return float(np.min(msg.time)), float(np.max(msg.time))


def _encode(n: int, floats: dict[str, np.ndarray], ints: dict[str, np.ndarray],
            labels: dict[str, Labels]) -> bytes:
    out: dict[str, Any] = {"v": FORMAT, "n": int(n)}
    for name, col in floats.items():
        col = np.asarray(col, dtype=np.float64)
        out[name] = None if np.all(np.isnan(col)) else np.ascontiguousarray(col, "<f8").tobytes()
    for name, col in ints.items():
        out[name] = _pack_int(np.asarray(col), name)
    lists: dict[str, Any] = {}
    ids: dict[str, Any] = {}
    codes: dict[str, Any] = {}
    for name, lab in labels.items():
        int_values, str_values, lab_codes = _split(lab, name)
        (ids if name in _ID_LABELS else lists)[name] = [
            np.asarray(int_values, dtype="<i8").tobytes(), str_values]
        codes[name] = _pack_int(lab_codes, name)
    out["z"], out["labels"] = _squeezed(lists)
    if ids:  # apart: the formulas never read them, and they are most of the label bytes
        out["zi"], out["ids"] = _squeezed(ids)
    out["codes"] = codes
    return msgpack.packb(out, use_bin_type=True)


def _squeezed(lists: dict[str, Any]) -> tuple[int, bytes]:
    """(how stored, the lists packed): zstd when it pays."""
    packed = msgpack.packb(lists, use_bin_type=True)
    if len(packed) < _SQUEEZE_MIN:
        return _PLAIN, packed
    squeezed = zstd.contexts()[0].compress(packed)
    return (_ZSTD, squeezed) if len(squeezed) < len(packed) else (_PLAIN, packed)


def _unsqueezed(m: dict[str, Any], z: str, key: str) -> dict[str, Any]:
    data, how = m[key], m[z]
    if how == _ZSTD and type(how) is int:
        data = zstd.contexts()[1].decompress(data)
    elif how:  # True (format 1): zlib
        data = zlib.decompress(data)
    found: dict[str, Any] = msgpack.unpackb(data, raw=False)
    return found


_INT_RANGES = [(kind, int(np.iinfo(kind).min), int(np.iinfo(kind).max)) for kind in _INT_TYPES]


def _pack_int(col: np.ndarray, name: str) -> list[Any] | None:
    """[type, bytes] in the narrowest type holding every value; None when all are -1."""
    if col.size == 0:
        return None
    lo, hi = int(col.min()), int(col.max())
    if lo == hi == -1:
        return None
    for kind, kind_lo, kind_hi in _INT_RANGES:
        if kind_lo <= lo and hi <= kind_hi:
            return [kind, np.ascontiguousarray(col, dtype=kind).tobytes()]
    raise ValueError(f"{name}: {lo}..{hi} does not fit in 64 bits")


def _split(lab: Labels, name: str) -> tuple[list[int], list[str], np.ndarray]:
    """A label column as (its integer labels, its string labels, codes into both joined)."""
    kinds = set(map(type, lab.values))  # (in C: the usual column is of one kind)
    values = lab.values if type(lab.values) is list else list(lab.values)  # (not copied)
    if kinds <= {str}:
        return [], values, np.asarray(lab.codes)  # type: ignore[return-value]
    if kinds <= {int}:
        ints_only: list[int] = values  # type: ignore[assignment]
        if not -(1 << 63) <= min(ints_only) <= max(ints_only) < (1 << 63):
            raise ValueError(f"{name}: an integer label does not fit in 64 bits")
        return ints_only, [], np.asarray(lab.codes)
    is_int = [isinstance(v, int | np.integer) for v in lab.values]
    order = [i for i, k in enumerate(is_int) if k] + [i for i, k in enumerate(is_int) if not k]
    remap = np.full(len(order) + 1, -1, dtype=np.int64)
    remap[order] = np.arange(len(order))
    ints = [int(v) for v, k in zip(lab.values, is_int, strict=True) if k]
    if ints and not -(1 << 63) <= min(ints) <= max(ints) < (1 << 63):
        raise ValueError(f"{name}: an integer label does not fit in 64 bits")
    strs = [str(v) for v, k in zip(lab.values, is_int, strict=True) if not k]
    return ints, strs, remap[np.asarray(lab.codes, dtype=np.int64)]


# ---------------------------------------------------------------- decoding


def decode_events(blobs: list[bytes], *, ids: bool = True) -> EventTable:
    """Many stored `events` blobs as one table, in the order given; without their sample and
    group ids when not `ids` (the formulas do not use them, and merging many distinct ids
    costs more than the rest)."""
    labels = [c for c, _ in _EVENT_LABELS if ids or c not in ("sample_id", "group_id")]
    cols = _decode_all(blobs, _EVENT_FLOATS, _EVENT_INTS, labels)
    if not ids:
        cols.update(sample_ids=[], sample_id=None, group_ids=[], group_id=None)
    return _event_table(cols)


def decode_each(blobs: list[bytes]) -> list[EventTable]:
    """Each stored `events` blob as a table of its own, without sample and group ids: its
    columns views of the blob (integers and label codes in the narrowest type it stored them
    in), its label lists its own. For a reader that copies the rows into buffers of its own
    (the pipeline's cached events): no concatenated copy is made on the way."""
    out = []
    for blob in blobs:
        m = msgpack.unpackb(blob, raw=False)
        _check_format(m)
        n = int(m["n"])
        lists = _unsqueezed(m, "z", "labels")
        cols: dict[str, Any] = {name: _unpack_float(m[name], n) for name in _EVENT_FLOATS}
        cols.update({name: _unpack_int(m[name], n) for name in _EVENT_INTS})
        for name, plural in _EVENT_LABELS:
            if name not in _ID_LABELS:
                ints, strs = lists[name]
                cols[plural] = [*np.frombuffer(ints, dtype="<i8").tolist(), *strs]
                cols[name] = _unpack_int(m["codes"][name], n)
        cols.update(sample_ids=[], sample_id=None, group_ids=[], group_id=None)
        out.append(_event_table(cols))
    return out


def decode_gauges(blobs: list[bytes]) -> GaugeTable:
    """Many stored `gauges` blobs as one table, in the order given."""
    cols = _decode_all(blobs, _GAUGE_FLOATS, (), [c for c, _ in _GAUGE_LABELS])
    return GaugeTable(time=cols["time"], names=cols["names"], name=cols["name"],
                      value=cols["value"], hosts=cols["hosts"], host=cols["host"],
                      devices=cols["devices"], device=cols["device"])


def concat_events(tables: list[EventTable]) -> EventTable:
    """Several tables as one (rows in the order given), their label lists merged."""
    cols: dict[str, Any] = {}
    for name in _EVENT_FLOATS + _EVENT_INTS:
        cols[name] = _concat([getattr(t, name) for t in tables],
                             np.int8 if name == "status" else None)
    for name, plural in _EVENT_LABELS:
        parts = []
        for t in tables:
            codes = getattr(t, name)
            if codes is None:
                codes = np.full(t.n, -1, dtype=np.int32)
            parts.append(_as_part(Labels(list(getattr(t, plural)), codes), name))
        cols[plural], cols[name] = _merge(parts)
    return _event_table(cols)


def _event_table(cols: dict[str, Any]) -> EventTable:
    return EventTable(
        names=cols["names"], name=cols["name"], sources=cols["sources"], source=cols["source"],
        start=cols["start"], end=cols["end"], step=cols["step"], rank=cols["rank"],
        servers=cols["servers"], server=cols["server"], slot=cols["slot"],
        status=cols["status"], tokens=cols["tokens"], sample_ids=cols["sample_ids"],
        sample_id=cols["sample_id"], group_ids=cols["group_ids"], group_id=cols["group_id"])


def _as_part(lab: Labels, name: str) -> _Part:
    ints, strs, codes = _split(lab, name)
    return np.asarray(ints, dtype=np.int64), strs, codes


def _decode_all(blobs: list[bytes], floats: tuple[str, ...], ints: tuple[str, ...],
                labels: list[str]) -> dict[str, Any]:
    maps = [msgpack.unpackb(b, raw=False) for b in blobs]
    cols: dict[str, Any] = {}
    for m in maps:
        _check_format(m)
    ns = [int(m["n"]) for m in maps]
    for name in floats:
        cols[name] = _concat([_unpack_float(m[name], n) for m, n in zip(maps, ns, strict=True)],
                             np.float64)
    for name in ints:
        cols[name] = _concat([_unpack_int(m[name], n) for m, n in zip(maps, ns, strict=True)],
                             np.int8 if name == "status" else np.int64)
    lists = [_unsqueezed(m, "z", "labels") for m in maps]
    if any(name in _ID_LABELS for name in labels):
        for m, lst in zip(maps, lists, strict=True):
            if "ids" in m:
                lst.update(_unsqueezed(m, "zi", "ids"))
    for name in labels:
        parts = [(np.frombuffer(lst[name][0], dtype="<i8"), lst[name][1],
                  _unpack_int(m["codes"][name], n))
                 for m, lst, n in zip(maps, lists, ns, strict=True)]
        # name -> names, host -> hosts, ...
        cols[name + "s"], cols[name] = (_join if name in _ID_LABELS else _merge)(parts)
    return cols


def _check_format(m: dict[str, Any]) -> None:
    if m.get("v") not in _READS or type(m.get("v")) is not int:
        raise ValueError(f"stored blob: format {m.get('v')!r}, this server reads "
                         f"{' and '.join(map(str, _READS))}")


def _unpack_float(data: bytes | None, n: int) -> np.ndarray:
    if data is None:
        return np.full(n, np.nan)
    col = np.frombuffer(data, dtype="<f8")
    if col.size != n:
        raise ValueError(f"stored blob: a column of {col.size} rows in a blob of {n}")
    return col


def _unpack_int(packed: list[Any] | None, n: int) -> np.ndarray:
    """The column as stored (a view of the blob in its own integer type)."""
    if packed is None:
        return np.full(n, -1, dtype=np.int8)
    kind, data = packed
    if kind not in _INT_TYPES:
        raise ValueError(f"stored blob: unknown integer type {kind!r}")
    col = np.frombuffer(data, dtype=kind)
    if col.size != n:
        raise ValueError(f"stored blob: a column of {col.size} rows in a blob of {n}")
    return col


def _concat(arrays: list[np.ndarray], dtype: Any) -> np.ndarray:
    if not arrays:
        return np.zeros(0, dtype=dtype or np.float64)
    return np.concatenate(arrays) if dtype is None else np.concatenate(arrays, dtype=dtype)


def _merge(parts: list[_Part]) -> tuple[list[Any], np.ndarray]:
    """One label list for many parts, and every part's codes remapped into it (int32). The
    integer labels are merged by one factorization (sorted); the strings through one dict (a
    label once per part that lists it; a part listing what the previous one did reuses its
    mapping)."""
    if not parts:
        return [], np.zeros(0, dtype=np.int32)
    uniq, inv = factorize(np.concatenate([p[0] for p in parts]))
    index: dict[str, int] = {}
    last: list[str] | None = None
    last_map = np.zeros(0, dtype=np.int64)
    out = []
    offset = 0
    for ints, strs, codes in parts:
        int_map = inv[offset:offset + ints.size]
        offset += ints.size
        if strs != last:
            last_map = np.array([index.setdefault(s, len(index)) for s in strs], dtype=np.int64)
            last = strs
        remap = np.concatenate([int_map, uniq.size + last_map, [-1]]).astype(np.int32)
        out.append(remap[codes])
    values: list[Any] = [*uniq.tolist(), *index]
    return values, np.concatenate(out)


def _join(parts: list[_Part]) -> tuple[list[Any], np.ndarray]:
    """The parts' label lists one after the other (a label in two parts is listed twice) and
    every part's codes shifted into the joined list (int32, -1 kept): for ids, where merging
    looks up every id and finds few twice."""
    values: list[Any] = []
    out = []
    for ints, strs, codes in parts:
        shifted = np.asarray(codes, dtype=np.int32) + np.int32(len(values))
        out.append(np.where(codes < 0, np.int32(-1), shifted))
        values += ints.tolist()
        values += strs
    if not out:
        return [], np.zeros(0, dtype=np.int32)
    return values, np.concatenate(out)


# ---------------------------------------------------------------- reading


def window(ev: EventTable, t0: float, t1: float) -> EventTable:
    """The events overlapping [t0, t1): start < t1 and (end, or an instant's start) ≥ t0."""
    keep = (ev.start < t1) & (np.fmax(ev.end, ev.start) >= t0)
    return take(ev, np.flatnonzero(keep))


def take(ev: EventTable, rows: np.ndarray) -> EventTable:
    """The rows `rows` of a table (its label lists shared)."""
    return EventTable(
        names=ev.names, name=ev.name[rows], sources=ev.sources, source=ev.source[rows],
        start=ev.start[rows], end=ev.end[rows], step=ev.step[rows], rank=ev.rank[rows],
        servers=ev.servers, server=ev.server[rows], slot=ev.slot[rows],
        status=ev.status[rows], tokens=ev.tokens[rows], sample_ids=ev.sample_ids,
        sample_id=None if ev.sample_id is None else ev.sample_id[rows],
        group_ids=ev.group_ids, group_id=None if ev.group_id is None else ev.group_id[rows])


def gauge_window(g: GaugeTable, t0: float, t1: float) -> GaugeTable:
    """The gauge points with t0 ≤ time < t1."""
    rows = np.flatnonzero((g.time >= t0) & (g.time < t1))
    return GaugeTable(time=g.time[rows], names=g.names, name=g.name[rows],
                      value=g.value[rows], hosts=g.hosts, host=g.host[rows],
                      devices=g.devices, device=g.device[rows])


def to_columns(ev: EventTable) -> dict[str, list[Any]]:
    """The read API's columnar events (docs/protocol.md `/events`): null for an instant's end,
    for a -1 step, rank, slot or tokens, for a null label or status."""
    return {
        "name": _labels(ev.names, ev.name),
        "start": ev.start.tolist(),
        "end": _nullable(ev.end, np.isnan(ev.end)),
        "source": _labels(ev.sources, ev.source),
        "step": _nullable(ev.step, ev.step < 0),
        "rank": _nullable(ev.rank, ev.rank < 0),
        "server": _labels(ev.servers, ev.server),
        "slot": _nullable(ev.slot, ev.slot < 0),
        "status": _labels(list(EVENT_STATUSES), ev.status),
        "tokens": _nullable(ev.tokens, ev.tokens < 0),
        "sample_id": _labels(ev.sample_ids, ev.sample_id, ev.n),
        "group_id": _labels(ev.group_ids, ev.group_id, ev.n),
    }


def _labels(values: list[Any], codes: np.ndarray | None, n: int = 0) -> list[Any]:
    if codes is None:
        return [None] * n
    if len(values) > 4 * codes.size + 1024:  # a window that uses few of many labels
        used, local = np.unique(codes, return_inverse=True)
        table = np.empty(used.size, dtype=object)
        table[:] = [None if c < 0 else values[c] for c in used.tolist()]
        few: list[Any] = table[local].tolist()
        return few
    table = np.empty(len(values) + 1, dtype=object)  # code -1 (null) takes the last: None
    table[:-1] = values
    out: list[Any] = table[np.asarray(codes, dtype=np.intp)].tolist()
    return out


def _nullable(col: np.ndarray, null: np.ndarray) -> list[Any]:
    if not null.any():  # (a column of generations' tokens, trainer events' ranks)
        whole: list[Any] = col.tolist()
        return whole
    out = col.astype(object)
    out[null] = None
    listed: list[Any] = out.tolist()
    return listed
