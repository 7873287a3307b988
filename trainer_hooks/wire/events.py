"""The columns of `events` and `gauges` messages, defined once, and their validation.

**The column tables.** An `events` message carries N spans (or instants) column by column, a
`gauges` message N points of time series (docs/protocol.md, `events`, `gauges`). The tuples
below name every column and its kind; the sender builds its messages from them
(`trainer_hooks.timeline`) and splits them by them (`protocol.split`).

**One value for all.** Any column may be one value instead of a list: it applies to every row
(`source="inference"`, `rank=0`). N is the length of the list columns (all alike); a message of
scalars only is one row.

**Dictionary-encoded labels.** A label column may also be `{"values": [distinct labels],
"codes": [an index into values per row, -1 = null]}`, codes a list or an integer typed array:
what the sender already knows (its distinct labels) is not spelt out per row, and the server
checks each value once and the codes with numpy (`trainer_hooks.wire.labels`, which samples'
string columns share).

**Validation.** `validate_events` and `validate_gauges` decode a message straight into numpy:
times as float64, integer columns as int64 with -1 for null, label columns as `Labels`
(distinct values and int32 codes, found with one `dict.fromkeys` in C; each distinct value is
checked once, not each row's copy). Number columns may be typed arrays
(`trainer_hooks.wire.arrays`): float64 or int64; an integer column also takes float64 with NaN
for null and whole values otherwise. Every problem is a `ProtocolError` naming the field and,
for a list, the first bad row (`end[3] must be ≥ start`). Fields that are no column are left
out and named in the ack (`left_out`), as samples' are.
"""

from __future__ import annotations

from typing import Any, TypeGuard

import numpy as np

from trainer_hooks.wire.arrays import is_array
from trainer_hooks.wire.columns import ENVELOPE, _float_column, unknown_fields
from trainer_hooks.wire.labels import check_labels, encoded, where
from trainer_hooks.wire.schema import (
    EVENT_STATUSES,
    MAX_EVENTS_PER_MESSAGE,
    MAX_ID_CHARS,
    MAX_KEY_CHARS,
    MAX_UNIX_SECONDS,
    Events,
    Gauges,
    Labels,
    ProtocolError,
)

# ---------------------------------------------------------------- the column tables

# events: labels (strings; `server`, `sample_id`, `group_id` also integers), never null for
# `name` (`source`: null or absent is DEFAULT_SOURCE); `status` one of EVENT_STATUSES or null.
EVENT_LABEL_COLUMNS = ("name", "source", "server", "status", "sample_id", "group_id")
EVENT_TIME_COLUMNS = ("start", "end")  # unix s; `end` null = an instant
EVENT_INT_COLUMNS = ("step", "rank", "slot", "tokens")  # integers ≥ 0 or null
EVENT_COLUMNS = ("name", "start", "end", "source", "step", "rank", "server", "slot", "status",
                 "tokens", "sample_id", "group_id")
DEFAULT_SOURCE = "trainer"
# gauges: `time` (unix s) and `value` (number or null) per point, `name` (a label, never
# null), `host` (a string) and `device` (a string or an integer), both optional.
GAUGE_COLUMNS = ("time", "name", "value", "host", "device")
COLUMNS_OF = {"events": EVENT_COLUMNS, "gauges": GAUGE_COLUMNS}

# Labels that may be integers, and the longest string each label column takes.
_INT_LABELS = frozenset({"server", "sample_id", "group_id", "device"})
_MAX_CHARS = {"sample_id": MAX_ID_CHARS, "group_id": MAX_ID_CHARS}
_EMPTY_ALLOWED = frozenset({"sample_id", "group_id"})  # ids as samples take them
_KNOWN = {kind: frozenset((*ENVELOPE, *columns)) for kind, columns in COLUMNS_OF.items()}
_INT_TYPES: frozenset[type] = frozenset({int, type(None)})
_NUMBER_TYPES: frozenset[type] = frozenset({int, float, type(None)})
_NONE = np.array([None], dtype=object)
_STATUS_CODE: dict[str | int, int] = {status: code for code, status in enumerate(EVENT_STATUSES)}


# ---------------------------------------------------------------- messages


def validate_events(obj: dict[str, Any], mid: str, mtype: str, run: str) -> Events:
    """Check an `events` message's columns (the table above) and decode them into numpy."""
    n = _row_count(obj, EVENT_COLUMNS)
    start = _times(obj, "start", n, required=True)
    end = _times(obj, "end", n, required=False)
    with np.errstate(invalid="ignore"):
        early = np.flatnonzero(end < start)
    if early.size:
        i = int(early[0])
        raise ProtocolError("invalid", "end", f"end[{i}] must be ≥ start ({end[i]:.6f} < "
                            f"{start[i]:.6f})")
    return Events(
        mid, mtype, run, n,
        name=_labels(obj, "name", n, required=True),
        start=start,
        end=end,
        source=_labels(obj, "source", n, default=DEFAULT_SOURCE),
        step=_ints(obj, "step", n),
        rank=_ints(obj, "rank", n),
        server=_labels(obj, "server", n),
        slot=_ints(obj, "slot", n),
        status=_statuses(obj, n),
        tokens=_ints(obj, "tokens", n),
        sample_id=_labels(obj, "sample_id", n),
        group_id=_labels(obj, "group_id", n),
        left_out=_unknown_fields(obj, mtype),
    )


def validate_gauges(obj: dict[str, Any], mid: str, mtype: str, run: str) -> Gauges:
    """Check a `gauges` message's columns (the table above) and decode them into numpy."""
    n = _row_count(obj, GAUGE_COLUMNS)
    values = obj.get("value")
    if is_array(values) or isinstance(values, list):
        value = _float_column(values, "value", n)  # non-finite and null → NaN
    elif values is None or type(values) in (int, float):
        value = np.full(n, np.nan if values is None else float(values), dtype=np.float64)
        value[~np.isfinite(value)] = np.nan
    else:
        raise ProtocolError("wrong_type", "value", "value must hold numbers or nulls")
    return Gauges(
        mid, mtype, run, n,
        time=_times(obj, "time", n, required=True),
        name=_labels(obj, "name", n, required=True),
        value=value,
        host=_labels(obj, "host", n),
        device=_labels(obj, "device", n),
        left_out=_unknown_fields(obj, mtype),
    )


def _is_column(value: Any) -> TypeGuard[list[Any] | np.ndarray]:
    return isinstance(value, list) or is_array(value)


def _row_count(obj: dict[str, Any], columns: tuple[str, ...]) -> int:
    """N: the length shared by every list column (1 when each column is one value)."""
    first: str | None = None
    n = 1
    for name in columns:
        value = obj.get(name)
        if isinstance(value, dict):  # a dictionary-encoded label column: its codes
            value = value.get("codes")
        if not _is_column(value):
            continue
        if first is None:
            first, n = name, len(value)
        elif len(value) != n:
            raise ProtocolError("length_mismatch", name, f"{name} has {len(value)} values; "
                                f"{first} has {n}")
    if first is not None and n == 0:
        raise ProtocolError("invalid", first, f"{first} is empty; a message needs at least one "
                            "row")
    if n > MAX_EVENTS_PER_MESSAGE:
        raise ProtocolError("too_many", first, f"{n} rows; the limit is "
                            f"{MAX_EVENTS_PER_MESSAGE}")
    return n


def _unknown_fields(obj: dict[str, Any], mtype: str) -> dict[str, str]:
    """{field: why} for each field that is no column of the message's type: left out and
    named, not silently dropped."""
    return unknown_fields(obj, _KNOWN[mtype], f"column of {mtype}")


# ---------------------------------------------------------------- times and integers


def _times(obj: dict[str, Any], name: str, n: int, *, required: bool) -> np.ndarray:
    """Unix seconds (0 ≤ t < 1e10, as samples' `time`), float64; null (NaN in a typed
    array) only when not `required`, kept as NaN."""
    value = obj.get(name)
    if value is None:
        if required:
            raise ProtocolError("missing_field", name, f"field {name!r} is required")
        return np.full(n, np.nan, dtype=np.float64)
    if is_array(value):
        arr = value.astype(np.float64)
    elif isinstance(value, list):
        kinds = set(map(type, value))  # in C; keeps bools and numeric strings out
        if not kinds <= _NUMBER_TYPES:
            i = _first(value, _NUMBER_TYPES)
            raise ProtocolError("wrong_type", name, f"{name}[{i}] must be unix seconds "
                                f"(a number), not {type(value[i]).__name__}")
        try:
            arr = np.array(value, dtype=np.float64)  # null → NaN
        except OverflowError:
            raise ProtocolError("invalid", name, f"{name} holds a number out of range") from None
    elif type(value) in (int, float):
        arr = np.full(n, float(value), dtype=np.float64)
    else:
        raise ProtocolError("wrong_type", name, f"{name} must be unix seconds (a number or a "
                            "list of numbers)")
    with np.errstate(invalid="ignore"):
        bad = (arr < 0) | (arr >= MAX_UNIX_SECONDS) | np.isinf(arr)
        if required:
            bad |= np.isnan(arr)
    rows = np.flatnonzero(bad)
    if rows.size:
        i = int(rows[0])
        got = float(arr[i])
        where = f"{name}[{i}]" if _is_column(value) else name
        if np.isnan(got):
            raise ProtocolError("missing_field", name, f"{where} is null; every row needs one")
        hint = " (milliseconds? send seconds)" if 1e12 <= got < 1e14 else ""
        raise ProtocolError("invalid", name, f"{where} must be unix seconds between 0 and "
                            f"{MAX_UNIX_SECONDS:.0e}, got {got:g}{hint}")
    return arr


def _ints(obj: dict[str, Any], name: str, n: int) -> np.ndarray:
    """Integers ≥ 0 or null, int64 with -1 for null: one int for all, a list of ints and
    nulls, an int64 typed array, or a float64 one (NaN = null, whole values)."""
    value = obj.get(name)
    if value is None:
        return np.full(n, -1, dtype=np.int64)
    if type(value) is int:
        if not 0 <= value < 2**63:
            raise ProtocolError("invalid", name, f"{name} must be an integer ≥ 0, got {value}")
        return np.full(n, value, dtype=np.int64)
    if is_array(value):
        arr = _int_array(value, name)
    elif isinstance(value, list):
        kinds = set(map(type, value))
        if not kinds <= _INT_TYPES:
            i = _first(value, _INT_TYPES)
            raise ProtocolError("wrong_type", name, f"{name}[{i}] must be an integer or null, "
                                f"not {type(value[i]).__name__}")
        try:
            if type(None) in kinds:
                objects = np.array(value, dtype=object)
                null = np.equal(objects, _NONE)
                objects[null] = 0
                arr = objects.astype(np.int64)
                negative = np.flatnonzero(arr < 0)
                arr[null] = -1
            else:
                arr = np.array(value, dtype=np.int64)
                negative = np.flatnonzero(arr < 0)
        except OverflowError:
            raise ProtocolError("invalid", name, f"{name} holds an integer out of "
                                "range") from None
        if negative.size:
            i = int(negative[0])
            raise ProtocolError("invalid", name, f"{name}[{i}] must be ≥ 0, got {value[i]}")
    else:
        raise ProtocolError("wrong_type", name, f"{name} must be an integer, null or a list "
                            "of them")
    return arr


def _int_array(value: np.ndarray, name: str) -> np.ndarray:
    if value.dtype.kind == "i":
        bad = np.flatnonzero(value < 0)
    else:  # float64: NaN is null, anything else a whole number
        null = np.isnan(value)
        with np.errstate(invalid="ignore"):
            bad = np.flatnonzero(~null & ((value < 0) | (value >= 2**53)
                                          | (value != np.floor(value))))
    if bad.size:
        i = int(bad[0])
        raise ProtocolError("invalid", name, f"{name}[{i}] must be an integer ≥ 0 or null, "
                            f"got {value[i]}")
    if value.dtype.kind == "i":
        return value.astype(np.int64, copy=False)
    out: np.ndarray = np.where(null, -1.0, value).astype(np.int64)
    return out


def _first(values: list[Any], types: frozenset[type]) -> int:
    """The index of the first value of another type (error path only)."""
    return next(i for i, v in enumerate(values) if type(v) not in types)


# ---------------------------------------------------------------- labels


def _labels(obj: dict[str, Any], name: str, n: int, *, required: bool = False,
            default: str | None = None) -> Labels:
    """A label column as `Labels`: distinct values (first-seen order) and one int32 code per
    row, -1 for null. `required`: no row may be null; `default` stands for an absent column
    and for a null row."""
    value = obj.get(name)
    if value is None:
        if required:
            raise ProtocolError("missing_field", name, f"field {name!r} is required")
        if default is not None:
            return Labels([default], np.zeros(n, dtype=np.int32))
        return Labels([], np.full(n, -1, dtype=np.int32))
    ints = name in _INT_LABELS
    if isinstance(value, dict):
        return _encoded_labels(value, name, n, ints, required=required, default=default)
    if is_array(value):
        if not ints or value.dtype.kind != "i":
            raise ProtocolError("wrong_type", name, f"{name} must hold strings"
                                + (" or integers" if ints else ""))
        uniques, codes = np.unique(value, return_inverse=True)
        return Labels(uniques.tolist(), codes.astype(np.int32))
    if not isinstance(value, list):
        _check_labels([value], name, ints, required=True, scalar=True)
        return Labels([value], np.zeros(n, dtype=np.int32))
    distinct = dict.fromkeys(value)  # hashing in C; None is a key too
    has_null = None in distinct
    if has_null:
        if required:
            raise ProtocolError("missing_field", name, f"{name}[{value.index(None)}] is null; "
                                "every row needs one")
        del distinct[None]
    _check_labels(list(distinct), name, ints, required=False, scalar=False, rows=value)
    if has_null and default is not None:
        distinct.setdefault(default)
    values: list[str | int] = list(distinct)
    if not has_null and len(values) == n:  # every row its own label (ids): codes in row order
        return Labels(values, np.arange(n, dtype=np.int32))
    position: dict[Any, int] = dict(zip(values, range(len(values)), strict=True))
    if has_null:
        position[None] = -1 if default is None else position[default]
    codes = np.fromiter(map(position.__getitem__, value), dtype=np.int32, count=n)
    return Labels(values, codes)


def _encoded_labels(value: dict[str, Any], name: str, n: int, ints: bool, *, required: bool,
                    default: str | None) -> Labels:
    """A label column sent dictionary-encoded (`labels.encoded`: each value checked once, the
    codes with numpy), with this column's nulls: refused where `required`, `default` where
    given."""
    values, codes = encoded(value, name, n, ints=ints, limit=_MAX_CHARS.get(name, MAX_KEY_CHARS),
                            empty=name in _EMPTY_ALLOWED)
    out = codes.astype(np.int32)
    null = out < 0
    if null.any():
        if required:
            i = int(np.flatnonzero(null)[0])
            raise ProtocolError("missing_field", name, f"{name}[{i}] is null; every row needs "
                                "one")
        if default is not None:
            values = list(values)
            if default not in values:
                values.append(default)
            out[null] = values.index(default)
    return Labels(list(values), out)


def _check_labels(distinct: list[Any], name: str, ints: bool, *, required: bool,
                  scalar: bool, rows: list[Any] | None = None) -> None:
    """`labels.check_labels` with this column's rules: ints where `_INT_LABELS`, its length
    limit, '' only for ids."""
    check_labels(distinct, name, ints=ints, limit=_MAX_CHARS.get(name, MAX_KEY_CHARS),
                 empty=name in _EMPTY_ALLOWED, required=required, scalar=scalar, rows=rows)


def _statuses(obj: dict[str, Any], n: int) -> np.ndarray:
    """`status`: int8 codes into EVENT_STATUSES, -1 for null."""
    labels = _labels(obj, "status", n)
    unknown = [v for v in labels.values if v not in _STATUS_CODE]
    if unknown:
        value = obj["status"]
        at = where("status", value if isinstance(value, list) else None, unknown[0],
                   not isinstance(value, list))
        raise ProtocolError("invalid", "status", f"{at} is {unknown[0]!r}; expected null or "
                            f"one of {EVENT_STATUSES}")
    table = np.array([_STATUS_CODE[v] for v in labels.values] + [-1], dtype=np.int8)
    out: np.ndarray = table[labels.codes]  # code -1 picks the table's last entry: null
    return out
