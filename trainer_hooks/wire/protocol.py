"""The wire protocol's public face (docs/protocol.md), defined once and imported by the server.

Pure: no Django, no Channels, no torch. `decode_frame` turns a text (JSON) or binary (msgpack)
frame into a dict; `validate_message` checks one message and returns a typed value whose
columnar fields are numpy arrays; every problem is a `ProtocolError` naming the offending
field. `encode` / `decode` turn a message into the bytes of one frame and back (the sender's
outbox keeps those bytes); `split` halves a message the server refused as too large. The
vocabulary (limits, key grammar, message types) lives in `schema`, the sample column table and
the columnar validator in `columns`, the `events` and `gauges` columns and validators in
`events`, the environments validator in `environments`; all are re-exported here.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import msgpack
import orjson

from trainer_hooks.wire import arrays, texts
from trainer_hooks.wire.columns import (
    ID_COLUMNS,
    LABEL_COLUMNS,
    NUMBER_COLUMNS,
    OPTIONAL_COLUMNS,
    OPTIONAL_LABEL_COLUMNS,
    OPTIONAL_NUMBER_COLUMNS,
    SAMPLE_COLUMNS,
    STRING_COLUMNS,
    TEXT_COLUMNS,
    check_text,
    set_text_limit,
    text_limit,
    utf8_bytes,
    validate_samples,
)
from trainer_hooks.wire.environments import parse_environments
from trainer_hooks.wire.events import (
    COLUMNS_OF,
    EVENT_COLUMNS,
    GAUGE_COLUMNS,
    validate_events,
    validate_gauges,
)
from trainer_hooks.wire.schema import (
    _NULLABLE_NUMBER_TYPES,
    DEFAULT_MAX_TEXT_BYTES_PER_MESSAGE,
    DISCARD_REASONS,
    EVENT_STATUSES,
    MAX_ENVIRONMENTS,
    MAX_EVENTS_PER_MESSAGE,
    MAX_ID_CHARS,
    MAX_KEY_CHARS,
    MAX_METRICS_PER_MESSAGE,
    MAX_SAMPLES_PER_MESSAGE,
    MAX_STEPS_PER_MESSAGE,
    MAX_TEXT_CHARS,
    MAX_UNIX_SECONDS,
    MESSAGE_TYPES,
    RUN_STATUSES,
    VERSION,
    AnyMessage,
    Barrier,
    EnvironmentDecl,
    Events,
    Gauges,
    Heartbeat,
    Labels,
    Message,
    ProtocolError,
    Ranges,
    RunEnd,
    RunStart,
    Samples,
    Step,
    check_json_tree,
    check_key,
    deceptive,
    opt_time,
    require,
    shown,
    split_key,
    step_number,
)

__all__ = [
    "DEFAULT_MAX_TEXT_BYTES_PER_MESSAGE", "DISCARD_REASONS", "EVENT_COLUMNS", "EVENT_STATUSES",
    "GAUGE_COLUMNS", "ID_COLUMNS", "LABEL_COLUMNS", "MAX_ENVIRONMENTS", "MAX_EVENTS_PER_MESSAGE",
    "MAX_ID_CHARS", "MAX_KEY_CHARS", "MAX_METRICS_PER_MESSAGE", "MAX_SAMPLES_PER_MESSAGE",
    "MAX_STEPS_PER_MESSAGE", "MAX_TEXT_CHARS", "MAX_UNIX_SECONDS", "MESSAGE_TYPES",
    "NUMBER_COLUMNS", "OPTIONAL_COLUMNS", "OPTIONAL_LABEL_COLUMNS", "OPTIONAL_NUMBER_COLUMNS",
    "RUN_STATUSES", "SAMPLE_COLUMNS", "STRING_COLUMNS", "TEXT_COLUMNS", "VERSION", "check_text",
    "AnyMessage", "Barrier", "EnvironmentDecl", "Events", "Gauges", "Heartbeat", "Labels",
    "Message", "ProtocolError", "Ranges", "RunEnd", "RunStart", "Samples", "Step", "check_key",
    "decode", "decode_frame", "encode", "encode_msgpack", "message_id", "parse_environments",
    "set_text_limit", "split", "split_key", "step_number", "text_limit", "unpack_labels",
    "unpack_text", "utf8_bytes", "validate_events", "validate_gauges", "validate_message",
    "validate_samples",
]


def decode_frame(data: bytes | str, *, binary: bool) -> Any:
    """Parse one frame: text → JSON, binary → msgpack. Raises ProtocolError(code='bad_frame')."""
    try:
        if binary:
            if isinstance(data, str):
                raise TypeError("a binary frame is bytes, not str")
            return msgpack.unpackb(data, raw=False, strict_map_key=False,
                                   ext_hook=arrays.ext_hook)
        return orjson.loads(data)
    except (orjson.JSONDecodeError, ValueError, msgpack.ExtraData, msgpack.FormatError,
            msgpack.StackError, TypeError) as exc:
        kind = "msgpack" if binary else "JSON"
        raise ProtocolError("bad_frame", None, f"frame is not valid {kind}: {exc}") from None


def message_id(obj: Any) -> Any:
    """The id to echo in an error reply, when the object has a usable one."""
    if isinstance(obj, dict):
        mid = obj.get("id")
        if isinstance(mid, (str, int)) and not isinstance(mid, bool):
            return mid
    return None


def validate_message(obj: Any) -> AnyMessage:
    """Check one decoded message (docs/protocol.md); return its typed form."""
    if not isinstance(obj, dict):
        raise ProtocolError("wrong_type", None, "a message must be an object")
    if type(obj.get("v")) is not int or obj["v"] != VERSION:  # not true, not 1.0
        raise ProtocolError("bad_version", "v", f"protocol version must be the integer {VERSION}")
    mid = require(obj, "id")
    if isinstance(mid, bool) or not isinstance(mid, (str, int)):
        raise ProtocolError("wrong_type", "id", "id must be a string")
    mid = str(mid)
    if not mid or len(mid) > MAX_ID_CHARS:
        raise ProtocolError("invalid", "id", f"id must be 1–{MAX_ID_CHARS} characters")
    bad = deceptive(mid)  # (a NUL too: PostgreSQL text cannot hold it)
    if bad is not None:
        raise ProtocolError("invalid", "id", f"id must not contain a control or invisible "
                            f"character ({shown(bad)})")
    mtype = require(obj, "type")
    if mtype not in MESSAGE_TYPES:
        raise ProtocolError(
            "unknown_type", "type", f"unknown type {mtype!r}; expected one of {MESSAGE_TYPES}"
        )
    run = check_key(require(obj, "run"), "run", kind="run name")
    msg = _VALIDATORS[mtype](obj, mid, mtype, run)
    incarnation = obj.get("incarnation")
    if incarnation is not None:
        if not isinstance(incarnation, str) or not 1 <= len(incarnation) <= MAX_ID_CHARS \
                or deceptive(incarnation) is not None:
            raise ProtocolError("invalid", "incarnation", f"incarnation must be a string of "
                                f"1–{MAX_ID_CHARS} characters without control or invisible "
                                "characters")
        msg = dataclasses.replace(msg, incarnation=incarnation)
    return msg


def _run_start(obj: dict[str, Any], mid: str, mtype: str, run: str) -> RunStart:
    config = obj.get("config")
    if config is not None and not isinstance(config, dict):
        raise ProtocolError("wrong_type", "config", "config must be an object")
    if config is not None:
        check_json_tree(config, "config")
    envs = obj.get("environments")
    return RunStart(
        mid, mtype, run, config,
        None if envs is None else parse_environments(envs, "environments"),
        opt_time(obj),
        _opt_bool(obj, "resume"),
        _total_steps(obj, config),
    )


def _total_steps(obj: dict[str, Any], config: dict[str, Any] | None) -> int | None:
    """`total_steps`, else a positive whole `config.total_steps` or `config.max_steps`."""
    if obj.get("total_steps") is not None:
        return step_number(obj["total_steps"], "total_steps")
    for name in ("total_steps", "max_steps"):
        value = (config or {}).get(name)
        if (type(value) is int or type(value) is float) and math.isfinite(value) \
                and value > 0 and value == int(value) and value < 2**63:
            return int(value)
    return None


def _opt_bool(obj: dict[str, Any], name: str) -> bool:
    value = obj.get(name)
    if value is None:
        return False
    if type(value) is not bool:
        raise ProtocolError("wrong_type", name, f"{name} must be true or false")
    return value


def _barrier(obj: dict[str, Any], mid: str, mtype: str, run: str) -> Barrier:
    return Barrier(mid, mtype, run)


def _heartbeat(obj: dict[str, Any], mid: str, mtype: str, run: str) -> Heartbeat:
    return Heartbeat(mid, mtype, run)


# Step keys already found valid: a trainer sends the same few hundred keys every step.
_CHECKED_KEYS: set[str] = set()
MAX_CHECKED_KEYS = 100_000


def _step(obj: dict[str, Any], mid: str, mtype: str, run: str) -> Step:
    step = step_number(require(obj, "step"), "step")
    metrics = require(obj, "metrics")
    if not isinstance(metrics, dict):
        raise ProtocolError("wrong_type", "metrics", "metrics must be an object")
    if len(metrics) > MAX_METRICS_PER_MESSAGE:
        raise ProtocolError(
            "too_many", "metrics", f"{len(metrics)} keys; the limit is {MAX_METRICS_PER_MESSAGE}"
        )
    finite: dict[str, float] = {}
    nonfinite: list[str] = []
    text: dict[str, str] = {}
    left_out: dict[str, str] = {}
    nulls: list[str] = []
    for key, value in metrics.items():
        if key not in _CHECKED_KEYS:
            check_key(key, f"metrics.{key}" if isinstance(key, str) else "metrics")
            if len(_CHECKED_KEYS) >= MAX_CHECKED_KEYS:
                _CHECKED_KEYS.clear()
            _CHECKED_KEYS.add(key)
        kind = type(value)
        if kind is bool:
            finite[key] = float(value)
        elif kind in _NULLABLE_NUMBER_TYPES:
            if value is None or not math.isfinite(value):
                nonfinite.append(key)
                if value is None:
                    nulls.append(key)
            else:
                finite[key] = float(value)
        elif kind is str and len(value) <= MAX_TEXT_CHARS and deceptive(value) is None:
            text[key] = value
        else:  # one bad value never loses the step's others: left out and reported
            left_out[key] = (f"a string of {len(value)} characters (the limit is "
                             f"{MAX_TEXT_CHARS}) or with control or invisible characters"
                             if kind is str
                             else f"a {kind.__name__}; expected a number, bool, string or null")
    return Step(mid, mtype, run, step, finite, tuple(nonfinite), opt_time(obj),
                text, left_out, tuple(nulls))


def _ranges(obj: dict[str, Any], mid: str, mtype: str, run: str) -> Ranges:
    return Ranges(mid, mtype, run, parse_environments(require(obj, "environments"),
                                                      "environments"))


def _run_end(obj: dict[str, Any], mid: str, mtype: str, run: str) -> RunEnd:
    status = require(obj, "status")
    if status not in RUN_STATUSES:
        raise ProtocolError("invalid", "status", f"status must be one of {RUN_STATUSES}")
    return RunEnd(mid, mtype, run, status, opt_time(obj))


_VALIDATORS: dict[str, Callable[[dict[str, Any], str, str, str], AnyMessage]] = {
    "run.start": _run_start,
    "step": _step,
    "samples": validate_samples,
    "ranges": _ranges,
    "run.end": _run_end,
    "barrier": _barrier,
    "heartbeat": _heartbeat,
    "events": validate_events,
    "gauges": validate_gauges,
}


# ---------------------------------------------------------------- encoding


_COLUMNAR = frozenset({"samples", "events", "gauges"})  # messages of columns: packed by parts


def encode(message: dict[str, Any], fmt: str, *, pack_text: bool = True) -> bytes:
    """The bytes of one frame: `fmt` "json" (a text frame; numpy arrays become lists, NaN and
    ±Inf null) or "msgpack" (a binary frame; number arrays as typed arrays, see
    `trainer_hooks.wire.arrays`; text columns packed and compressed, `trainer_hooks.wire.texts`).
    A columnar message (samples, events, gauges) is packed field by field (a map field, such
    as `metrics`, item by item), so a big batch never holds the GIL for one long C call while
    the training thread waits (zstd runs without it); any other in one call. `pack_text`
    False: text columns as lists of strings (for a server older than packed text)."""
    if fmt == "json":
        return orjson.dumps(message, option=orjson.OPT_SERIALIZE_NUMPY)
    if message.get("type") not in _COLUMNAR:
        try:  # (a step's metrics, a control message: plain values, short; the same bytes)
            packed: bytes = msgpack.packb(message, use_bin_type=True)
            return packed
        except (TypeError, ValueError):  # a numpy value: packed as below
            pass
    packer = msgpack.Packer(use_bin_type=True, default=_plain_or_fail)
    parts = [packer.pack_map_header(len(message))]
    for key, value in message.items():
        parts.append(packer.pack(key))
        if pack_text and key in TEXT_COLUMNS and isinstance(value, list):
            parts.append(packer.pack(msgpack.ExtType(texts.TEXT, texts.pack(value))))
        elif isinstance(value, dict):  # `metrics`, a dictionary-encoded label column, ...
            parts.append(packer.pack_map_header(len(value)))
            for name, column in value.items():
                parts.append(packer.pack(name))
                parts.append(packer.pack(arrays.packable(column)))
        else:
            parts.append(packer.pack(arrays.packable(value)))
    return b"".join(parts)


def encode_msgpack(message: dict[str, Any]) -> bytes:
    return encode(message, "msgpack")


def decode(body: bytes, fmt: str) -> dict[str, Any]:
    """A message `encode` made, back (the sender reads its own messages: a dict)."""
    message = decode_frame(body, binary=fmt == "msgpack")
    if not isinstance(message, dict):
        raise ProtocolError("wrong_type", None, "a message must be an object")
    unpack_text(message)  # packed by `encode`: lists again (a split halves them)
    return message


def unpack_text(message: dict[str, Any]) -> bool:
    """A decoded message's packed text columns as lists of strings again, in place; True when
    it had any."""
    packed = [name for name in TEXT_COLUMNS if isinstance(message.get(name), texts.PackedText)]
    for name in packed:
        message[name] = message[name].values()
    return bool(packed)


def unpack_labels(message: dict[str, Any]) -> bool:
    """A decoded samples message's dictionary-encoded label columns (LABEL_COLUMNS) as lists
    again (None for a code of -1), in place; True when it had any."""
    coded = [name for name in LABEL_COLUMNS if isinstance(message.get(name), dict)]
    for name in coded:
        values, codes = [*message[name]["values"], None], message[name]["codes"]  # -1: None
        message[name] = [values[c] for c in (codes.tolist() if arrays.is_array(codes)
                                             else codes)]
    return bool(coded)


def _plain_or_fail(obj: Any) -> Any:
    tolist = getattr(obj, "tolist", None)
    if tolist is not None:
        return tolist()
    raise TypeError(f"cannot encode {type(obj).__name__}")


def split(message: dict[str, Any]) -> list[dict[str, Any]] | None:
    """Halve a message that the server refused as too large: samples by rows (every column of
    the sample column table that is a list, and each metric column), events and gauges by rows
    (every column that is a list; one value for all stays in both halves), a step by metric
    keys. None when it cannot be split (one row, one key, or another type). The halves get
    derived ids (`<id>.0`, `<id>.1`): the original was never applied."""
    mid = str(message.get("id"))
    kind = message.get("type")
    if kind == "samples":
        n = len(message["reward"])
        if n < 2:
            return None
        h = n // 2
        halves = _halve_rows(message, SAMPLE_COLUMNS, h)
        if isinstance(message.get("metrics"), dict):
            halves[0]["metrics"] = {k: v[:h] for k, v in message["metrics"].items()}
            halves[1]["metrics"] = {k: v[h:] for k, v in message["metrics"].items()}
    elif kind in COLUMNS_OF:
        columns = COLUMNS_OF[str(kind)]
        lengths = [len(v) for name in columns
                   if isinstance(v := _rows_of(message.get(name)), list) or arrays.is_array(v)]
        if not lengths or lengths[0] < 2:
            return None
        halves = _halve_rows(message, columns, lengths[0] // 2)
    elif kind == "step":
        items = list((message.get("metrics") or {}).items())
        if len(items) < 2:
            return None
        h = len(items) // 2
        halves = [{**message, "metrics": dict(items[:h])}, {**message, "metrics": dict(items[h:])}]
    else:
        return None
    for i, half in enumerate(halves):
        half["id"] = f"{mid}.{i}"
    return halves


def _halve_rows(message: dict[str, Any], columns: tuple[str, ...], h: int
                ) -> list[dict[str, Any]]:
    """Two copies of a columnar message, each list column cut at row `h`."""
    halves = [dict(message), dict(message)]
    for name in columns:
        value = message.get(name)
        if isinstance(value, list) or arrays.is_array(value):
            halves[0][name], halves[1][name] = value[:h], value[h:]
        elif isinstance(value, dict) and "codes" in value:  # dictionary-encoded labels
            codes = value["codes"]
            halves[0][name] = {**value, "codes": codes[:h]}
            halves[1][name] = {**value, "codes": codes[h:]}
    return halves


def _rows_of(value: Any) -> Any:
    """A column's per-row part: a dictionary-encoded label column's codes."""
    return value.get("codes") if isinstance(value, dict) else value
