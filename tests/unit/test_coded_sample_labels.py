"""A samples message's string columns (`env`, `stop_reason`, `discard_reason`) sent
dictionary-encoded, `{"values": [...], "codes": [...]}` (docs/protocol.md, `samples`): each
value checked once by the rules of a listed one, errors naming `<column>.values` or
`<column>.codes`, -1 a null as a null in the list is; and the validated column, its dictionary
and the stored bytes exactly what the list of those strings gives."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgpack
import numpy as np
import pytest

from ingest.core import columns
from trainer_hooks.wire import protocol as p
from trainer_hooks.wire.columns import FEW_MIN_SAMPLES

LABELS = ("env", "stop_reason", "discard_reason")


def samples(n: int, **extra: Any) -> dict[str, Any]:
    return {"v": 1, "id": "x", "type": "samples", "run": "r", "step": [i // 50 for i in range(n)],
            "sample_id": list(range(n)), "group_id": [i // 4 for i in range(n)],
            "reward": [float(i % 7) for i in range(n)], **extra}


def coded(rows: Sequence[str | None], values: list[str] | None = None,
          array: bool = False) -> dict[str, Any]:
    """The dictionary-encoded form of a list (values in first-seen order unless given)."""
    values = values if values is not None else list(dict.fromkeys(r for r in rows
                                                                   if r is not None))
    codes = [-1 if r is None else values.index(r) for r in rows]
    return {"values": values, "codes": np.array(codes, dtype=np.int64) if array else codes}


def validated(msg: dict[str, Any]) -> p.Samples:
    got = p.validate_message(msg)
    assert isinstance(got, p.Samples)
    return got


def refused(msg: dict[str, Any]) -> p.ProtocolError:
    with pytest.raises(p.ProtocolError) as info:
        p.validate_message(msg)
    return info.value


def check_same(listed: p.Samples, as_coded: p.Samples) -> None:
    """The same columns, dictionaries (np.unique's) and stored bytes."""
    for name in LABELS:
        a, b = getattr(listed, name), getattr(as_coded, name)
        assert (a is None) == (b is None)
        if a is None:
            continue
        assert a.dtype == b.dtype and a.tolist() == b.tolist()
        for s in (listed, as_coded):
            uniques, codes = columns.dictionary(s, name)
            want_u, want_c = np.unique(a, return_inverse=True)
            assert uniques.dtype == want_u.dtype and uniques.tolist() == want_u.tolist()
            assert codes.dtype == want_c.dtype and np.array_equal(codes, want_c)
    assert [(s, k, bytes(b)) for s, k, b in columns.encode_steps(listed)] == \
        [(s, k, bytes(b)) for s, k, b in columns.encode_steps(as_coded)]


ROWS: list[tuple[str, list[Any], list[str] | None]] = [
    ("two envs, long", ["math", "countdown"] * 100, None),
    ("short (no dictionary from the list)", ["math", "code", "math"], None),
    ("nulls and blanks", ["math", None, "", "code", None] * 20, None),
    ("only nulls", [None] * 70, []),
    ("a value no row uses, values unsorted", ["b", "a"] * 40, ["zz", "b", "a", ""]),
    ("many distinct", [f"e{i}" for i in range(300)], None),
    ("unicode", ["é-unicode", "a b", "math"] * 30, None),
]


@pytest.mark.parametrize(("what", "rows", "values"), ROWS, ids=[r[0] for r in ROWS])
@pytest.mark.parametrize("array", [False, True])
def test_the_coded_form_is_validated_and_stored_as_the_list(
        what: str, rows: list[Any], values: list[str] | None, array: bool) -> None:
    n = len(rows)
    reasons = [(None, "max_async", "zero_advantage", "canceled")[i % 4] for i in range(n)]
    stops = [("length", "stop", None)[i % 3] for i in range(n)]
    listed = validated(samples(n, env=rows, stop_reason=stops, discard_reason=reasons))
    sent = validated(samples(n, env=coded(rows, values, array),
                             stop_reason=coded(stops, array=array),
                             discard_reason=coded(reasons, array=array)))
    check_same(listed, sent)
    assert sent.env.tolist() == [r or "" for r in rows]  # -1 (null) is '' as a null listed


def test_through_a_msgpack_frame_the_codes_are_a_typed_array() -> None:
    n = 4 * FEW_MIN_SAMPLES
    envs = ["math", "countdown"] * (n // 2)
    body = p.encode_msgpack(samples(n, env=coded(envs, array=True)))
    obj = p.decode_frame(body, binary=True)
    assert isinstance(obj["env"]["codes"], np.ndarray)  # one ext value, not n integers
    check_same(validated(samples(n, env=envs)), validated(obj))


def test_coded_and_listed_messages_concatenate_as_listed_ones() -> None:
    """Batches of a step stored from either form assemble alike (the store's dictionaries
    are per batch)."""
    n = 200
    envs = ["math" if i % 3 else "code" for i in range(n)]
    a = validated(samples(n, env=envs))
    b = validated(samples(n, env=coded(envs, ["code", "math", "unused"])))
    blobs_a = [columns.unpack(blob) for _, _, blob in columns.encode_steps(a)]
    blobs_b = [columns.unpack(blob) for _, _, blob in columns.encode_steps(b)]
    mixed = [blobs_a[0], *blobs_b[1:]]
    got, _ = columns.assemble_steps([mixed])
    want, _ = columns.assemble_steps([blobs_a])
    assert got.env.tobytes() == want.env.tobytes() and got.env_names == want.env_names


BAD: list[tuple[str, Any, str, str, str]] = [
    ("a code out of range", {"values": ["math", "code"], "codes": [0, 1, 1, 0, 7, 0]},
     "invalid", "env.codes", "env.codes[4] is 7; it must index env.values (0–1) or be -1 (null)"),
    ("a code below -1", {"values": ["math"], "codes": [0, -2, 0, 0, 0, 0]},
     "invalid", "env.codes", "env.codes[1] is -2"),
    ("too few codes", {"values": ["math"], "codes": [0] * 5},
     "length_mismatch", "env.codes", "env.codes has 5 values; the message has 6 rows"),
    ("too many codes", {"values": ["math"], "codes": np.zeros(7, dtype=np.int64)},
     "length_mismatch", "env.codes", "env.codes has 7 values"),
    ("float codes", {"values": ["math"], "codes": np.zeros(6)},
     "wrong_type", "env.codes", "env.codes must hold integers"),
    ("codes not integers", {"values": ["math"], "codes": [0, 0, 0, 0, 0, True]},
     "wrong_type", "env.codes", "env.codes must be a list of integers"),
    ("values not distinct", {"values": ["math", "code", "math"], "codes": [0] * 6},
     "invalid", "env.values", "env.values must be distinct"),
    ("a deceptive value", {"values": ["math", "ma\u202eth"], "codes": [0] * 6},
     "invalid", "env.values", "env.values[1] contains a control or invisible character "
     "(U+202E)"),
    ("a NUL numpy would drop", {"values": ["a", "a\x00"], "codes": [0, 1] * 3},
     "invalid", "env.values", "env.values[1] contains a control or invisible character "
     "(U+0000)"),
    ("a control character", {"values": ["ma\nth"], "codes": [0] * 6},
     "invalid", "env.values", "env.values[0] contains a control"),
    ("a value too long", {"values": ["m", "x" * 201], "codes": [0] * 6},
     "invalid", "env.values", "env.values[1] is 201 characters; the limit is 200"),
    ("a null value", {"values": ["math", None], "codes": [0] * 6},
     "wrong_type", "env.values", "env.values[1] must be a string, not NoneType"),
    ("a number value", {"values": [3], "codes": [0] * 6},
     "wrong_type", "env.values", "env.values[0] must be a string, not int"),
    ("values not a list", {"values": "math", "codes": [0] * 6},
     "wrong_type", "env.values", "env.values must be a list"),
    ("another field", {"values": ["math"], "codes": [0] * 6, "nulls": []},
     "wrong_type", "env", "exactly the fields 'values' and 'codes'"),
]


@pytest.mark.parametrize(("what", "column", "code", "field", "says"), BAD,
                         ids=[b[0] for b in BAD])
def test_a_bad_coded_column_is_refused_naming_the_field(what: str, column: Any, code: str,
                                                        field: str, says: str) -> None:
    exc = refused(samples(6, env=column))
    assert (exc.code, exc.field) == (code, field) and says in exc.message
    other = refused(samples(6, stop_reason=column))  # the same rules for stop_reason
    assert other.field == field.replace("env", "stop_reason")


def test_a_discard_reason_is_checked_against_the_known_ones_by_value() -> None:
    exc = refused(samples(6, discard_reason={"values": ["max_async", "bored"],
                                             "codes": [0, 0, 0, 0, 0, -1]}))
    assert (exc.code, exc.field) == ("invalid", "discard_reason.values")
    assert exc.message == ("discard_reason.values[1] is 'bored'; expected null or one of "
                           f"{p.DISCARD_REASONS}")
    # a blank is kept, as in a list; a null too
    kept = validated(samples(4, discard_reason={"values": ["", "canceled"],
                                                "codes": [0, -1, 1, 0]}))
    assert kept.discard_reason.tolist() == ["", "", "canceled", ""]


def test_the_list_form_keeps_its_errors() -> None:
    exc = refused(samples(6, discard_reason=["bored"] * 6))
    assert (exc.field, exc.message) == ("discard_reason", "unknown discard reason 'bored'; "
                                        f"expected null or one of {p.DISCARD_REASONS}")
    assert refused(samples(6, env=["a\u202e"] * 6)).field == "env"


def test_a_coded_column_halves_as_the_list_does() -> None:
    n = 2 * FEW_MIN_SAMPLES + 2
    envs = ["math", "code", "math"] * (n // 3) + ["x"] * (n % 3)
    halves = p.split(samples(n, env=coded(envs, array=True)))
    assert halves is not None
    for half, part in zip(halves, (envs[:n // 2], envs[n // 2:]), strict=True):
        assert validated(half).env.tolist() == part


def test_a_stored_coded_blob_reads_back_as_sent() -> None:
    envs = ["math", None, "code"] * 30
    s = validated(samples(len(envs), env=coded(envs)))
    back = [columns.decode_batch(blob)["env"].tolist() for _, _, blob in
            columns.encode_steps(s)]
    assert sum(back, []) == [e or "" for e in envs]
    assert all(set(msgpack.unpackb(blob)["env"]) <= {"u", "b", "c"}
               for _, _, blob in columns.encode_steps(s))
