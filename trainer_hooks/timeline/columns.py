"""Buffered rows → the columns of `events` and `gauges` messages, on the flushing thread.

What a caller logged is taken as it came (Python floats from `time.time()`, numpy or torch
scalars, lists, arrays, tensors). `clean_*` turn each column into what the wire takes
(`trainer_hooks.wire.events`) and mark the rows the server would refuse, so one bad row is
left out and named instead of costing its whole message (the server refuses a message whole).
Type checks run over the column in C (`set(map(type, ...))`, `dict.fromkeys`); a column of
unusual types (numpy scalars) takes a per-value path. `wire_columns` then makes each column as
small as the wire allows: one value for all rows, a typed array, or a list with nulls.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from trainer_hooks.wire.events import DEFAULT_SOURCE, EVENT_COLUMNS, GAUGE_COLUMNS
from trainer_hooks.wire.schema import (
    EVENT_STATUSES,
    MAX_ID_CHARS,
    MAX_KEY_CHARS,
    MAX_UNIX_SECONDS,
    deceptive,
)

_FLOATS: frozenset[type] = frozenset({int, float, type(None)})
_INTS: frozenset[type] = frozenset({int, type(None)})
_INT_ONLY: set[type] = {int}
_NULL_ONLY: set[type] = {type(None)}
_BAD = object()  # a label that cannot go on the wire
_NONE = np.array([None], dtype=object)


@dataclass
class Cleaned:
    """Columns of one kind (EVENT_COLUMNS or GAUGE_COLUMNS order) with the rows to drop and
    why: {column: (rows dropped for it, an example)}."""

    n: int
    columns: dict[str, Any]
    keep: np.ndarray
    problems: dict[str, tuple[int, str]] = field(default_factory=dict)

    def mark(self, name: str, bad: np.ndarray, why: Callable[[int], str]) -> None:
        fresh = bad & self.keep
        if fresh.any():
            first = int(np.flatnonzero(fresh)[0])
            self.problems[name] = (int(fresh.sum()), why(first))
            self.keep &= ~bad


# ---------------------------------------------------------------- columns


def numbers(values: list[Any]) -> tuple[np.ndarray, np.ndarray]:
    """float64 (NaN for null) and the rows that are no number (a string, a bool, an object)."""
    if set(map(type, values)) <= _FLOATS:
        try:
            return np.array(values, dtype=np.float64), np.zeros(len(values), dtype=bool)
        except OverflowError:
            pass
    out = np.full(len(values), np.nan)
    wrong = np.zeros(len(values), dtype=bool)
    for i, v in enumerate(values):  # numpy and torch scalars, or garbage
        if v is None:
            continue
        if isinstance(v, (bool, str, bytes)):
            wrong[i] = True
            continue
        try:
            out[i] = float(v)
        except (TypeError, ValueError, OverflowError):
            wrong[i] = True
    return out, wrong


def times(values: list[Any], *, nullable: bool) -> tuple[np.ndarray, np.ndarray]:
    """float64 unix seconds (NaN for null) and the rows that are no unix time (0 ≤ t < 1e10;
    a null too unless `nullable`)."""
    arr, bad = numbers(values)
    with np.errstate(invalid="ignore"):
        bad |= (arr < 0) | (arr >= MAX_UNIX_SECONDS) | np.isinf(arr)
    if not nullable:
        bad |= np.isnan(arr)
    return arr, bad


def ints(values: list[Any]) -> tuple[np.ndarray, np.ndarray]:
    """int64 (-1 for null) and the rows that are no integer ≥ 0."""
    kinds = set(map(type, values))
    if kinds == _NULL_ONLY:
        return np.full(len(values), -1, dtype=np.int64), np.zeros(len(values), dtype=bool)
    if kinds == _INT_ONLY:
        try:
            arr = np.array(values, dtype=np.int64)
            return arr, arr < 0
        except OverflowError:
            pass
    elif kinds <= _INTS:
        try:
            objects = np.array(values, dtype=object)
            null = np.equal(objects, _NONE)
            objects[null] = 0
            arr = objects.astype(np.int64)
            bad = arr < 0
            arr[null] = -1
            return arr, bad
        except OverflowError:
            pass
    arr = np.full(len(values), -1, dtype=np.int64)
    bad = np.zeros(len(values), dtype=bool)
    for i, v in enumerate(values):
        if v is None:
            continue
        try:
            if isinstance(v, bool):
                raise TypeError
            value = operator.index(v)  # numpy and torch integers too
        except TypeError:
            bad[i] = True
            continue
        if 0 <= value < 2**63:
            arr[i] = value
        else:
            bad[i] = True
    return arr, bad


def labels(values: list[Any], *, allow_int: bool, allow_empty: bool = False,
           choices: Sequence[str] | None = None, default: str | None = None,
           limit: int = MAX_KEY_CHARS, required: bool = False) -> tuple[list[Any], np.ndarray]:
    """The column with each value as the wire takes it (a str, an int where `allow_int`, None;
    `default` for None) and the rows that cannot go (a None too when `required`). Each
    distinct value is checked once; a column of plain strings, ints and Nones that are all
    fine is checked in C."""
    values, bad = _labels(values, allow_int, allow_empty, choices, default, limit)
    if required and None in values:
        bad |= np.fromiter(map(operator.is_, values, itertools.repeat(None)), dtype=bool,
                           count=len(values))
    return values, bad


def _labels(values: list[Any], allow_int: bool, allow_empty: bool,
            choices: Sequence[str] | None, default: str | None, limit: int
            ) -> tuple[list[Any], np.ndarray]:
    kinds = set(map(type, values))
    plain = _PLAIN_LABELS if allow_int and choices is None else _PLAIN_STRINGS
    if kinds <= plain:
        distinct = dict.fromkeys(values)
        if _all_fine(distinct, kinds, allow_empty, choices, limit):
            if default is not None and None in distinct:
                values = [default if v is None else v for v in values]
            return values, np.zeros(len(values), dtype=bool)
    try:
        distinct = dict.fromkeys(values)
    except TypeError:  # an unhashable value (a list)
        values = [v if _hashable(v) else _BAD for v in values]
        distinct = dict.fromkeys(values)
    as_wire = {v: _label(v, allow_int, allow_empty, choices, default, limit) for v in distinct}
    if any(w is not v for v, w in as_wire.items()):
        values = list(map(as_wire.__getitem__, values))
    if _BAD in as_wire.values():
        bad = np.fromiter(map(operator.is_, values, itertools.repeat(_BAD)), dtype=bool,
                          count=len(values))
    else:
        bad = np.zeros(len(values), dtype=bool)
    return values, bad


_PLAIN_STRINGS: frozenset[type] = frozenset({str, type(None)})
_PLAIN_LABELS: frozenset[type] = frozenset({str, int, type(None)})


def _all_fine(distinct: dict[Any, None], kinds: set[type], allow_empty: bool,
              choices: Sequence[str] | None, limit: int) -> bool:
    """Every distinct label (plain str, int or None) goes on the wire as it is."""
    if int in kinds:
        numbers = [v for v in distinct if type(v) is int] if str in kinds else \
            list(filter(None, distinct))  # ints (and None): 0 and None dropped, both fine
        if numbers and not (-(2**63) <= min(numbers) and max(numbers) < 2**63):
            return False
        if str not in kinds:
            return True
    strings = list(distinct) if kinds == {str} else [v for v in distinct if type(v) is str]
    if not strings:
        return True
    if max(map(len, strings)) > limit or (not allow_empty and "" in distinct):
        return False
    if choices is not None and not set(strings) <= set(choices):
        return False
    return deceptive("".join(strings)) is None  # one pass in C


def _hashable(value: Any) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


def _label(value: Any, allow_int: bool, allow_empty: bool, choices: Sequence[str] | None,
           default: str | None, limit: int) -> Any:
    if value is None:
        return default
    if isinstance(value, str):
        text = str(value)  # numpy str_ as str
        ok = (len(text) <= limit and (allow_empty or text) and deceptive(text) is None
              and (choices is None or text in choices))
        return text if ok else _BAD
    if allow_int and choices is None and not isinstance(value, bool):
        try:
            number = operator.index(value)
        except TypeError:
            return _BAD
        return number if -(2**63) <= number < 2**63 else _BAD
    return _BAD


# ---------------------------------------------------------------- messages


def clean_events(columns: dict[str, list[Any]], n: int) -> Cleaned:
    """Event columns (EVENT_COLUMNS; absent ones all None) as the wire takes them, and the
    rows to drop."""
    out = Cleaned(n, {}, np.ones(n, dtype=bool))
    col = columns.get
    for name in ("start", "end"):
        arr, bad = times(col(name) or [None] * n, nullable=name == "end")
        out.columns[name] = arr
        out.mark(name, bad, _says(name, col(name), "is no unix time in seconds"))
    with np.errstate(invalid="ignore"):
        early = out.columns["end"] < out.columns["start"]
    out.mark("end", early, lambda i: f"end {out.columns['end'][i]!r} is before start "
             f"{out.columns['start'][i]!r}")
    for name in ("step", "rank", "slot", "tokens"):
        arr, bad = ints(col(name) or [None] * n)
        out.columns[name] = arr
        out.mark(name, bad, _says(name, col(name), "is no integer ≥ 0"))
    specs: dict[str, dict[str, Any]] = {
        "name": {"allow_int": False},
        "source": {"allow_int": False, "default": DEFAULT_SOURCE},
        "server": {"allow_int": True},
        "status": {"allow_int": False, "choices": EVENT_STATUSES},
        "sample_id": {"allow_int": True, "allow_empty": True, "limit": MAX_ID_CHARS},
        "group_id": {"allow_int": True, "allow_empty": True, "limit": MAX_ID_CHARS},
    }
    for name, spec in specs.items():
        values, bad = labels(col(name) or [None] * n, required=name == "name", **spec)
        out.columns[name] = values
        out.mark(name, bad, _says(name, col(name), _LABEL_RULE[name]))
    return out


def clean_gauges(columns: dict[str, list[Any]], n: int) -> Cleaned:
    """Gauge columns (GAUGE_COLUMNS) as the wire takes them, and the rows to drop."""
    out = Cleaned(n, {}, np.ones(n, dtype=bool))
    col = columns.get
    arr, bad = times(col("time") or [None] * n, nullable=False)
    out.columns["time"] = arr
    out.mark("time", bad, _says("time", col("time"), "is no unix time in seconds"))
    value, bad = numbers(col("value") or [None] * n)
    value[~np.isfinite(value)] = np.nan  # null on the wire, as the server stores it
    out.columns["value"] = value
    out.mark("value", bad, _says("value", col("value"), "is no number"))
    for name, allow_int in (("name", False), ("host", False), ("device", True)):
        values, bad = labels(col(name) or [None] * n, allow_int=allow_int,
                             required=name == "name")
        out.columns[name] = values
        out.mark(name, bad, _says(name, col(name), _LABEL_RULE[name]))
    return out


_LABEL_RULE = {
    "name": "is no name (a string of 1–200 characters, no control or invisible character)",
    "source": "is no label (a string of 1–200 characters, no control or invisible character)",
    "server": "is no string or integer label",
    "status": f"is not null or one of {EVENT_STATUSES}",
    "sample_id": "is no string or integer id",
    "group_id": "is no string or integer id",
    "host": "is no label (a string of 1–200 characters, no control or invisible character)",
    "device": "is no string or integer label",
}


def _says(name: str, values: list[Any] | None, rule: str) -> Callable[[int], str]:
    def why(i: int) -> str:
        got = None if values is None else values[i]
        return f"{name} {got!r:.80} {rule}"
    return why


def wire_columns(cleaned: Cleaned, kind: str, *, lists_for_nulls: bool
                 ) -> tuple[int, dict[str, Any]]:
    """The kept rows' columns, each as small as the wire allows (absent when all null, one
    value when all alike); integer columns with nulls as a list (`lists_for_nulls`: JSON) or
    float64 with NaN (msgpack's typed arrays)."""
    keep = cleaned.keep
    all_kept = bool(keep.all())
    n = cleaned.n if all_kept else int(keep.sum())
    out: dict[str, Any] = {}
    for name in EVENT_COLUMNS if kind == "events" else GAUGE_COLUMNS:
        value = cleaned.columns[name]
        if isinstance(value, np.ndarray):
            value = value if all_kept else value[keep]
            column = _number_column(value, lists_for_nulls)
        else:
            value = value if all_kept else list(itertools.compress(value, keep))
            column = _label_column(value, lists_for_nulls)
        if column is not None:
            out[name] = column
    return n, out


def _number_column(arr: np.ndarray, lists_for_nulls: bool) -> Any:
    if arr.dtype.kind == "f":
        return None if np.isnan(arr).all() else arr
    null = arr < 0
    if null.all():
        return None
    if not null.any():
        return int(arr[0]) if (arr == arr[0]).all() else arr
    if lists_for_nulls:
        listed: list[Any] = arr.tolist()
        for i in np.flatnonzero(null).tolist():
            listed[i] = None
        return listed
    return np.where(null, np.nan, arr.astype(np.float64))


def _label_column(values: list[Any], lists: bool) -> Any:
    """One value for all; or, when the labels repeat (at most one distinct label per
    ENCODE_RATIO rows: names, sources, servers) or some rows have none (ids of generations
    among other events), dictionary-encoded — the distinct labels and a code per row (an int64
    typed array, a list for JSON; -1 for none); otherwise the list."""
    distinct = dict.fromkeys(values)
    if len(distinct) == 1:
        return next(iter(distinct))  # one for all (None: absent)
    if len(distinct) * ENCODE_RATIO > len(values) and None not in distinct:
        return values
    position = dict(zip(distinct, range(len(distinct)), strict=True))
    labels = list(distinct)
    if None in position:
        del labels[position[None]]
        position = dict(zip(labels, range(len(labels)), strict=True))
        position[None] = -1
    codes = np.fromiter(map(position.__getitem__, values), dtype=np.int64, count=len(values))
    return {"values": labels, "codes": codes.tolist() if lists else codes}


ENCODE_RATIO = 4


def pieces(columns: dict[str, Any], n: int, limit: int) -> list[dict[str, Any]]:
    """The columns cut into pieces of at most `limit` rows (one value for all stays whole)."""
    if n <= limit:
        return [columns]
    def cut(value: Any, lo: int) -> Any:
        if isinstance(value, (list, np.ndarray)):
            return value[lo:lo + limit]
        if isinstance(value, dict):  # dictionary-encoded: its codes (the values as they are)
            return {"values": value["values"], "codes": value["codes"][lo:lo + limit]}
        return value

    return [{name: cut(value, lo) for name, value in columns.items()}
            for lo in range(0, n, limit)]
