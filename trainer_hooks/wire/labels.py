"""Label columns, checked alike for every message that has them: the checks of distinct labels
and the dictionary-encoded form of a label column (docs/protocol.md, "Events and gauges" and
`samples`).

**Dictionary-encoded labels.** A label column may come as `{"values": [distinct labels],
"codes": [an index into values per row, -1 = null]}`, codes a list or an integer typed array:
what the sender already knows (its distinct labels) is not spelt out per row, and the server
checks each value once and the codes with numpy. `encoded` reads that form for `events` and
`gauges` (`trainer_hooks.wire.events`) and for the string columns of `samples` (`env`,
`stop_reason`, `discard_reason`: `trainer_hooks.wire.columns`); each message type then says
what a null row is.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trainer_hooks.wire.arrays import is_array
from trainer_hooks.wire.schema import MAX_KEY_CHARS, ProtocolError, deceptive, shown

_LABEL_TYPES: frozenset[type] = frozenset({str, type(None)})
_INT_LABEL_TYPES: frozenset[type] = frozenset({str, int, type(None)})


def encoded(value: dict[str, Any], name: str, n: int, *, ints: bool = False,
            limit: int = MAX_KEY_CHARS, empty: bool = False) -> tuple[list[Any], np.ndarray]:
    """A label column sent dictionary-encoded, `{"values": [distinct labels], "codes": [one
    index per row, -1 = null]}` (codes a list or an integer typed array): its values, each
    checked once (`check_labels`: strings, or ints where `ints`; at most `limit` characters;
    '' only where `empty`), and its n codes as an integer array, each -1 ≤ code < len(values),
    checked with numpy — nothing per row in Python. Errors name `<name>.values` or
    `<name>.codes` and the first bad entry."""
    if set(value) != {"values", "codes"}:
        raise ProtocolError("wrong_type", name, f"{name} as an object must have exactly the "
                            "fields 'values' and 'codes'")
    values, raw = value["values"], value["codes"]
    if not isinstance(values, list):
        raise ProtocolError("wrong_type", f"{name}.values", f"{name}.values must be a list")
    check_labels(values, f"{name}.values", ints=ints, limit=limit, empty=empty, required=True,
                 scalar=False, rows=values)
    if len(set(values)) != len(values):  # (a set: half the time of dict.fromkeys)
        raise ProtocolError("invalid", f"{name}.values", f"{name}.values must be distinct")
    if is_array(raw):
        if raw.dtype.kind != "i":
            raise ProtocolError("wrong_type", f"{name}.codes", f"{name}.codes must hold "
                                "integers")
        codes = raw
    elif isinstance(raw, list) and set(map(type, raw)) <= {int}:
        try:
            codes = np.array(raw, dtype=np.int64)
        except OverflowError:
            raise ProtocolError("invalid", f"{name}.codes", f"{name}.codes holds an integer "
                                "out of range") from None
    else:
        raise ProtocolError("wrong_type", f"{name}.codes", f"{name}.codes must be a list of "
                            "integers")
    if len(codes) != n:
        raise ProtocolError("length_mismatch", f"{name}.codes", f"{name}.codes has "
                            f"{len(codes)} values; the message has {n} rows")
    bad = np.flatnonzero((codes < -1) | (codes >= len(values)))
    if bad.size:
        i = int(bad[0])
        raise ProtocolError("invalid", f"{name}.codes", f"{name}.codes[{i}] is {codes[i]}; "
                            f"it must index {name}.values (0–{len(values) - 1}) or be -1 "
                            "(null)")
    return values, codes


def check_labels(distinct: list[Any], field: str, *, ints: bool = False,
                 limit: int = MAX_KEY_CHARS, empty: bool = False, required: bool,
                 scalar: bool, rows: list[Any] | None = None) -> None:
    """Each distinct label: a string (or an int where `ints`), not empty unless `empty`, at
    most `limit` characters, nothing `deceptive`. Errors name `field` and the first row of
    `rows` holding the bad value."""
    allowed = _INT_LABEL_TYPES if ints else _LABEL_TYPES
    kinds = set(map(type, distinct))
    what = "a string" + (" or an integer" if ints else "")
    if not kinds <= allowed or (required and type(None) in kinds):
        bad = next(v for v in distinct if type(v) not in allowed or v is None)
        raise ProtocolError("wrong_type", field, f"{where(field, rows, bad, scalar)} must be "
                            f"{what}, not {type(bad).__name__}")
    strings = [v for v in distinct if type(v) is str] if int in kinds else distinct
    if strings and max(map(len, strings)) > limit:
        bad = next(v for v in strings if len(v) > limit)
        raise ProtocolError("invalid", field, f"{where(field, rows, bad, scalar)} is {len(bad)} "
                            f"characters; the limit is {limit}")
    if not empty and "" in strings:
        raise ProtocolError("invalid", field, f"{where(field, rows, '', scalar)} is empty")
    if deceptive("".join(strings)) is not None:  # one pass in C over every distinct value
        bad = next(v for v in strings if deceptive(v) is not None)
        char = deceptive(bad)
        assert char is not None
        raise ProtocolError("invalid", field, f"{where(field, rows, bad, scalar)} contains a "
                            f"control or invisible character ({shown(char)})")
    if int in kinds:
        big = [v for v in distinct if type(v) is int and not -(2**63) <= v < 2**63]
        if big:
            raise ProtocolError("invalid", field, f"{where(field, rows, big[0], scalar)} is an "
                                "integer out of range")


def where(name: str, rows: list[Any] | None, bad: Any, scalar: bool) -> str:
    """`name[i]` for the first row holding `bad` (error path only), or `name`."""
    if scalar or rows is None:
        return name
    i = next(i for i, v in enumerate(rows) if type(v) is type(bad) and v == bad)
    return f"{name}[{i}]"
