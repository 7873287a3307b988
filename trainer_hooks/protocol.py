"""The wire schema (PROTOCOL.md §1), defined once and imported by the server.

Pure: no Django, no Channels, no torch. `decode_frame` turns a text (JSON) or binary (msgpack)
frame into a dict; `validate_message` checks one message and returns a typed value whose
columnar fields are numpy arrays. Every problem is a `ProtocolError` naming the offending field.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import msgpack
import numpy as np
import orjson

VERSION = 1
MESSAGE_TYPES = ("run.start", "step", "samples", "ranges", "run.end")
DISCARD_REASONS = ("max_async", "zero_advantage", "canceled")
RUN_STATUSES = ("finished", "failed")
MAX_KEY_CHARS = 200
MAX_ID_CHARS = 200
MAX_SAMPLES_PER_MESSAGE = 100_000
MAX_METRICS_PER_MESSAGE = 10_000
MAX_ENVIRONMENTS = 1_000

_CONTROL = {chr(c) for c in range(0x20)} | {"\x7f"}
_NUMBER_TYPES = frozenset({int, float})
_NULLABLE_NUMBER_TYPES = frozenset({int, float, type(None)})
_ID_TYPES = frozenset({int, str})


class ProtocolError(ValueError):
    """A message that must be rejected whole; `field` names the offending part."""

    def __init__(self, code: str, field: str | None, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.field = field
        self.message = message

    def as_reply(self, msg_id: Any = None) -> dict[str, Any]:
        return {
            "type": "error",
            "id": msg_id,
            "code": self.code,
            "field": self.field,
            "message": self.message,
        }


# ---------------------------------------------------------------- keys


def check_key(key: Any, field: str, *, kind: str = "key") -> str:
    """Validate a metric key or name: 1–200 characters, no control characters, no empty
    `/`-segments. Returns the key; raises ProtocolError naming `field`."""
    if not isinstance(key, str):
        raise ProtocolError("wrong_type", field, f"{kind} must be a string")
    if not key:
        raise ProtocolError("bad_key", field, f"{kind} is empty")
    if len(key) > MAX_KEY_CHARS:
        raise ProtocolError(
            "bad_key", field, f"{kind} is {len(key)} characters; the limit is {MAX_KEY_CHARS}"
        )
    if not _CONTROL.isdisjoint(key):
        raise ProtocolError("bad_key", field, f"{kind} {key!r} contains a control character")
    if "" in key.split("/"):
        raise ProtocolError("bad_key", field, f"{kind} {key!r} has an empty '/' segment")
    return key


def split_key(key: str) -> tuple[str, str | None, str]:
    """`section/group/metric` grammar: no `/` → (General, None, key); one → (section, None,
    metric); two or more → (section, group, rest joined by `/`)."""
    parts = key.split("/")
    if len(parts) == 1:
        return "General", None, key
    if len(parts) == 2:
        return parts[0], None, parts[1]
    return parts[0], parts[1], "/".join(parts[2:])


# ---------------------------------------------------------------- messages


@dataclass(frozen=True)
class EnvironmentDecl:
    name: str
    weight: float | None = None
    reward_min: float | None = None
    reward_max: float | None = None
    metrics_ranges: dict[str, dict[str, Any]] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "weight": self.weight,
            "reward_min": self.reward_min,
            "reward_max": self.reward_max,
            "metrics_ranges": self.metrics_ranges,
        }


@dataclass(frozen=True)
class Message:
    id: str
    type: str
    run: str


@dataclass(frozen=True)
class RunStart(Message):
    config: dict[str, Any] | None
    environments: list[EnvironmentDecl] | None
    time: float | None


@dataclass(frozen=True)
class Step(Message):
    step: int
    metrics: dict[str, float]  # finite values only
    nonfinite: tuple[str, ...]  # keys whose value was null, NaN or ±Inf
    time: float | None


@dataclass(frozen=True)
class Ranges(Message):
    environments: list[EnvironmentDecl]


@dataclass(frozen=True)
class RunEnd(Message):
    status: str
    time: float | None


@dataclass(frozen=True)
class Samples(Message):
    """Columnar samples. Numeric columns are float64 with NaN for null / non-finite; string
    columns are numpy unicode arrays ('' for null); an absent optional column is None."""

    n: int
    step: np.ndarray  # int64
    sample_id: np.ndarray  # int64 when every id is an integer, else str
    group_id: np.ndarray  # int64 when every id is an integer, else str
    reward: np.ndarray
    env: np.ndarray  # str, '' = no environment
    advantage: np.ndarray | None
    prompt_tokens: np.ndarray | None
    completion_tokens: np.ndarray | None
    stop_reason: np.ndarray | None  # str
    off_policy_steps: np.ndarray | None
    discard_reason: np.ndarray  # str, '' = kept
    time: np.ndarray | None
    metrics: dict[str, np.ndarray]


AnyMessage = RunStart | Step | Samples | Ranges | RunEnd


def decode_frame(data: bytes | str, *, binary: bool) -> Any:
    """Parse one frame: text → JSON, binary → msgpack. Raises ProtocolError(code='bad_frame')."""
    try:
        if binary:
            return msgpack.unpackb(data, raw=False, strict_map_key=False)
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
    """Check one decoded message against PROTOCOL.md §1; return its typed form."""
    if not isinstance(obj, dict):
        raise ProtocolError("wrong_type", None, "a message must be an object")
    if obj.get("v") != VERSION:
        raise ProtocolError("bad_version", "v", f"protocol version must be {VERSION}")
    mid = _require(obj, "id")
    if isinstance(mid, bool) or not isinstance(mid, (str, int)):
        raise ProtocolError("wrong_type", "id", "id must be a string")
    mid = str(mid)
    if not mid or len(mid) > MAX_ID_CHARS:
        raise ProtocolError("invalid", "id", f"id must be 1–{MAX_ID_CHARS} characters")
    mtype = _require(obj, "type")
    if mtype not in MESSAGE_TYPES:
        raise ProtocolError(
            "unknown_type", "type", f"unknown type {mtype!r}; expected one of {MESSAGE_TYPES}"
        )
    run = check_key(_require(obj, "run"), "run", kind="run name")
    return _VALIDATORS[mtype](obj, mid, mtype, run)


def _require(obj: dict[str, Any], name: str) -> Any:
    if name not in obj or obj[name] is None:
        raise ProtocolError("missing_field", name, f"field {name!r} is required")
    return obj[name]


def _opt_number(obj: dict[str, Any], name: str) -> float | None:
    value = obj.get(name)
    if value is None:
        return None
    if type(value) not in _NUMBER_TYPES or not math.isfinite(value):
        raise ProtocolError("wrong_type", name, f"{name} must be a finite number")
    return float(value)


def _step_number(value: Any, name: str) -> int:
    if type(value) is not int:
        raise ProtocolError("wrong_type", name, f"{name} must be an integer")
    if value < 0:
        raise ProtocolError("invalid", name, f"{name} must be ≥ 0, got {value}")
    if value >= 2**63:
        raise ProtocolError("invalid", name, f"{name} is too large")
    return value


def _run_start(obj: dict[str, Any], mid: str, mtype: str, run: str) -> RunStart:
    config = obj.get("config")
    if config is not None and not isinstance(config, dict):
        raise ProtocolError("wrong_type", "config", "config must be an object")
    envs = obj.get("environments")
    return RunStart(
        mid, mtype, run, config,
        None if envs is None else parse_environments(envs, "environments"),
        _opt_number(obj, "time"),
    )


def _step(obj: dict[str, Any], mid: str, mtype: str, run: str) -> Step:
    step = _step_number(_require(obj, "step"), "step")
    metrics = _require(obj, "metrics")
    if not isinstance(metrics, dict):
        raise ProtocolError("wrong_type", "metrics", "metrics must be an object")
    if len(metrics) > MAX_METRICS_PER_MESSAGE:
        raise ProtocolError(
            "too_many", "metrics", f"{len(metrics)} keys; the limit is {MAX_METRICS_PER_MESSAGE}"
        )
    finite: dict[str, float] = {}
    nonfinite: list[str] = []
    for key, value in metrics.items():
        check_key(key, f"metrics.{key}" if isinstance(key, str) else "metrics")
        if type(value) not in _NULLABLE_NUMBER_TYPES:
            raise ProtocolError(
                "wrong_type", f"metrics.{key}", f"value of {key!r} must be a number or null"
            )
        if value is None or not math.isfinite(value):
            nonfinite.append(key)
        else:
            finite[key] = float(value)
    return Step(mid, mtype, run, step, finite, tuple(nonfinite), _opt_number(obj, "time"))


def _ranges(obj: dict[str, Any], mid: str, mtype: str, run: str) -> Ranges:
    return Ranges(mid, mtype, run, parse_environments(_require(obj, "environments"),
                                                      "environments"))


def _run_end(obj: dict[str, Any], mid: str, mtype: str, run: str) -> RunEnd:
    status = _require(obj, "status")
    if status not in RUN_STATUSES:
        raise ProtocolError("invalid", "status", f"status must be one of {RUN_STATUSES}")
    return RunEnd(mid, mtype, run, status, _opt_number(obj, "time"))


_VALIDATORS = {
    "run.start": _run_start,
    "step": _step,
    "samples": lambda obj, mid, mtype, run: _samples(obj, mid, mtype, run),
    "ranges": _ranges,
    "run.end": _run_end,
}


# ---------------------------------------------------------------- environments


def parse_environments(envs: Any, field: str) -> list[EnvironmentDecl]:
    """Validate an `environments:` list (PROTOCOL.md §1, environment shape)."""
    if not isinstance(envs, list):
        raise ProtocolError("wrong_type", field, "environments must be a list")
    if len(envs) > MAX_ENVIRONMENTS:
        raise ProtocolError("too_many", field, f"more than {MAX_ENVIRONMENTS} environments")
    out: list[EnvironmentDecl] = []
    seen: set[str] = set()
    for i, env in enumerate(envs):
        where = f"{field}[{i}]"
        if not isinstance(env, dict):
            raise ProtocolError("wrong_type", where, "an environment must be an object")
        name = check_key(env.get("name"), f"{where}.name", kind="environment name")
        if name in seen:
            raise ProtocolError("invalid", f"{where}.name", f"environment {name!r} is repeated")
        seen.add(name)
        lo = _opt_number(env, "reward_min") if "reward_min" in env else None
        hi = _opt_number(env, "reward_max") if "reward_max" in env else None
        _check_bounds(lo, hi, f"{where}.reward_max")
        out.append(EnvironmentDecl(
            name=name,
            weight=_field_number(env, "weight", where),
            reward_min=lo,
            reward_max=hi,
            metrics_ranges=_metrics_ranges(env.get("metrics_ranges"), f"{where}.metrics_ranges"),
        ))
    return out


def _field_number(obj: dict[str, Any], name: str, where: str) -> float | None:
    try:
        return _opt_number(obj, name)
    except ProtocolError as exc:
        raise ProtocolError(exc.code, f"{where}.{name}", exc.message) from None


def _check_bounds(lo: float | None, hi: float | None, where: str) -> None:
    if lo is not None and hi is not None and not lo < hi:
        raise ProtocolError("invalid", where, f"max ({hi}) must be greater than min ({lo})")


def _metrics_ranges(ranges: Any, where: str) -> dict[str, dict[str, Any]]:
    if ranges is None:
        return {}
    if not isinstance(ranges, dict):
        raise ProtocolError("wrong_type", where, "metrics_ranges must be an object")
    out: dict[str, dict[str, Any]] = {}
    for name, spec in ranges.items():
        at = f"{where}.{name}"
        check_key(name, at, kind="metric name")
        if not isinstance(spec, dict):
            raise ProtocolError("wrong_type", at, "a metric range must be an object")
        lo = _field_number(spec, "min", at)
        hi = _field_number(spec, "max", at)
        _check_bounds(lo, hi, f"{at}.max")
        invert = spec.get("invert", False)
        if not isinstance(invert, bool):
            raise ProtocolError("wrong_type", f"{at}.invert", "invert must be true or false")
        out[name] = {"min": lo, "max": hi, "invert": invert}
    return out


# ---------------------------------------------------------------- samples (columnar)


def _samples(obj: dict[str, Any], mid: str, mtype: str, run: str) -> Samples:
    reward_list = _require(obj, "reward")
    if not isinstance(reward_list, list):
        raise ProtocolError("wrong_type", "reward", "reward must be a list")
    n = len(reward_list)
    if n == 0:
        raise ProtocolError("invalid", "reward", "a samples message needs at least one sample")
    if n > MAX_SAMPLES_PER_MESSAGE:
        raise ProtocolError(
            "too_many", "reward", f"{n} samples; the limit is {MAX_SAMPLES_PER_MESSAGE}"
        )
    step_value = _require(obj, "step")
    if isinstance(step_value, list):
        step = _int_column(step_value, "step", n)
    else:
        step = np.full(n, _step_number(step_value, "step"), dtype=np.int64)
    discard = _str_column(obj, "discard_reason", n, allow_scalar=True)
    if discard is None:
        discard = np.full(n, "", dtype="<U1")
    else:
        bad = ~np.isin(discard, ("",) + DISCARD_REASONS)
        if bad.any():
            raise ProtocolError(
                "invalid", "discard_reason",
                f"unknown discard reason {str(discard[bad][0])!r}; expected null or one of "
                f"{DISCARD_REASONS}",
            )
    env = _str_column(obj, "env", n, allow_scalar=True)
    return Samples(
        mid, mtype, run, n,
        step=step,
        sample_id=_id_column(obj, "sample_id", n),
        group_id=_id_column(obj, "group_id", n),
        reward=_float_column(reward_list, "reward", n),
        env=np.full(n, "", dtype="<U1") if env is None else env,
        advantage=_opt_float_column(obj, "advantage", n),
        prompt_tokens=_opt_float_column(obj, "prompt_tokens", n),
        completion_tokens=_opt_float_column(obj, "completion_tokens", n),
        stop_reason=_str_column(obj, "stop_reason", n, allow_scalar=False),
        off_policy_steps=_opt_float_column(obj, "off_policy_steps", n),
        discard_reason=discard,
        time=_opt_float_column(obj, "time", n),
        metrics=_metric_columns(obj.get("metrics"), n),
    )


def _check_list(values: Any, name: str, n: int) -> list[Any]:
    if not isinstance(values, list):
        raise ProtocolError("wrong_type", name, f"{name} must be a list")
    if len(values) != n:
        raise ProtocolError(
            "length_mismatch", name, f"{name} has {len(values)} values; reward has {n}"
        )
    return values


def _float_column(values: Any, name: str, n: int) -> np.ndarray:
    values = _check_list(values, name, n)
    # map(type) runs in C; it keeps bools and numeric strings out, which numpy would coerce.
    if not set(map(type, values)) <= _NULLABLE_NUMBER_TYPES:
        raise ProtocolError("wrong_type", name, f"{name} must hold numbers or nulls")
    try:
        arr = np.array(values, dtype=np.float64)
    except OverflowError:
        raise ProtocolError("invalid", name, f"{name} holds a number out of range") from None
    arr[~np.isfinite(arr)] = np.nan
    return arr


def _opt_float_column(obj: dict[str, Any], name: str, n: int) -> np.ndarray | None:
    values = obj.get(name)
    return None if values is None else _float_column(values, name, n)


def _int_column(values: Any, name: str, n: int) -> np.ndarray:
    values = _check_list(values, name, n)
    if set(map(type, values)) != {int}:
        raise ProtocolError("wrong_type", name, f"{name} must hold integers")
    try:
        arr = np.array(values, dtype=np.int64)
    except OverflowError:
        raise ProtocolError("invalid", name, f"{name} holds an integer out of range") from None
    if arr.min() < 0:
        raise ProtocolError("invalid", name, f"{name} must be ≥ 0")
    return arr


def _id_column(obj: dict[str, Any], name: str, n: int) -> np.ndarray:
    values = _check_list(_require(obj, name), name, n)
    kinds = set(map(type, values))
    if not kinds <= _ID_TYPES:
        raise ProtocolError("wrong_type", name, f"{name} must hold strings or integers")
    if kinds == {int}:  # kept as integers: sorting and grouping them is much cheaper
        try:
            return np.array(values, dtype=np.int64)
        except OverflowError:
            raise ProtocolError("invalid", name, f"{name} holds an integer out of range") from None
    arr = np.array(values, dtype=str)
    if arr.dtype.itemsize // 4 > MAX_ID_CHARS:
        raise ProtocolError("invalid", name, f"{name} values are limited to {MAX_ID_CHARS} chars")
    return arr


def _str_column(obj: dict[str, Any], name: str, n: int, *, allow_scalar: bool) -> np.ndarray | None:
    values = obj.get(name)
    if values is None:
        return None
    if allow_scalar and isinstance(values, str):
        return np.full(n, values)
    values = _check_list(values, name, n)
    kinds = set(map(type, values))
    if not kinds <= {str, type(None)}:
        raise ProtocolError("wrong_type", name, f"{name} must hold strings or nulls")
    if type(None) in kinds:
        objects = np.array(values, dtype=object)
        objects[np.equal(objects, None)] = ""
        arr = objects.astype(str)
    else:
        arr = np.array(values, dtype=str)
    if arr.dtype.itemsize // 4 > MAX_KEY_CHARS:
        raise ProtocolError("invalid", name, f"{name} values are limited to {MAX_KEY_CHARS} chars")
    return arr


def _metric_columns(metrics: Any, n: int) -> dict[str, np.ndarray]:
    if metrics is None:
        return {}
    if not isinstance(metrics, dict):
        raise ProtocolError("wrong_type", "metrics", "metrics must be an object of columns")
    if len(metrics) > MAX_METRICS_PER_MESSAGE:
        raise ProtocolError("too_many", "metrics", f"more than {MAX_METRICS_PER_MESSAGE} metrics")
    out: dict[str, np.ndarray] = {}
    for name, values in metrics.items():
        field = f"metrics.{name}" if isinstance(name, str) else "metrics"
        check_key(name, field, kind="metric name")
        out[name] = _float_column(values, field, n)
    return out


# ---------------------------------------------------------------- encoding (client side)


def encode_json(message: dict[str, Any]) -> bytes:
    """JSON-encode a message; numpy arrays become lists, NaN/Inf become null."""
    return orjson.dumps(message, option=orjson.OPT_SERIALIZE_NUMPY)


def encode_msgpack(message: dict[str, Any]) -> bytes:
    return msgpack.packb(message, default=_msgpack_default, use_bin_type=True)


def _msgpack_default(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    raise TypeError(f"cannot encode {type(obj).__name__}")
