"""The wire schema's vocabulary (docs/protocol.md): limits, `ProtocolError`, the key grammar,
the typed messages and the field readers every validator shares.

Pure: no Django, no Channels, no torch. `trainer_hooks.wire.protocol` is the public face.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from trainer_hooks.wire.texts import TextColumn

VERSION = 1
MESSAGE_TYPES = ("run.start", "step", "samples", "ranges", "run.end", "barrier", "heartbeat",
                 "events", "gauges")
DISCARD_REASONS = ("max_async", "zero_advantage", "canceled")
RUN_STATUSES = ("finished", "failed")
MAX_KEY_CHARS = 200
MAX_ID_CHARS = 200
MAX_SAMPLES_PER_MESSAGE = 100_000
MAX_EVENTS_PER_MESSAGE = 100_000  # spans of one `events` message, points of one `gauges`
EVENT_STATUSES = ("normal", "discarded", "canceled", "eval")  # codes 0..3; -1 = null
# Distinct steps one samples message may span: the server stores a batch per step, so a message
# over many steps holds the database long; senders split instead (trainer_hooks does).
MAX_STEPS_PER_MESSAGE = 500
MAX_METRICS_PER_MESSAGE = 10_000
MAX_ENVIRONMENTS = 1_000
MAX_TEXT_CHARS = 128  # a categorical step value
# Sample text (`columns.TEXT_COLUMNS`): the UTF-8 bytes of both columns of one samples message
# may not exceed the server's limit (TELESCOPE_MAX_TEXT_BYTES_PER_MESSAGE, this by default; the
# server sets `columns.set_text_limit`). trainer_hooks keeps each sample's text under it.
DEFAULT_MAX_TEXT_BYTES_PER_MESSAGE = 4 << 20


def deceptive(text: str) -> str | None:
    """The one rule for names, keys, labels and ids (docs/protocol.md "Messages"): the first
    character of `text` that could hide or disguise what a reader sees, or None. That is any
    character `str.isprintable` refuses (one pass in C): Unicode controls and format characters
    (Cc, Cf: C0 and C1 controls, DEL, bidi overrides and isolates such as U+202E and U+2066,
    zero-width characters such as U+200B), line and paragraph separators (U+2028, U+2029),
    spaces other than ' ', surrogates, private-use and unassigned code points."""
    if text.isprintable():
        return None
    return next(c for c in text if not c.isprintable())


def shown(char: str) -> str:
    """A refused character as an error message names it."""
    return f"U+{ord(char):04X}"
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
    """Validate a metric key or name: 1–200 characters, nothing `deceptive` (control, format
    or invisible characters), no empty `/`-segments. Returns the key; raises ProtocolError
    naming `field`."""
    if not isinstance(key, str):
        raise ProtocolError("wrong_type", field, f"{kind} must be a string")
    if not key:
        raise ProtocolError("bad_key", field, f"{kind} is empty")
    if len(key) > MAX_KEY_CHARS:
        raise ProtocolError(
            "bad_key", field, f"{kind} is {len(key)} characters; the limit is {MAX_KEY_CHARS}"
        )
    bad = deceptive(key)
    if bad is not None:
        raise ProtocolError("bad_key", field, f"{kind} {key!r} contains a control or invisible "
                            f"character ({shown(bad)})")
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
    # The client's id for one run attempt (see `run.start`): messages carrying one that a
    # `run.start` has opened go to that run, whatever its name has become since.
    incarnation: str | None = field(default=None, kw_only=True)


@dataclass(frozen=True)
class RunStart(Message):
    config: dict[str, Any] | None
    environments: list[EnvironmentDecl] | None
    time: float | None
    resume: bool = False  # continue the newest run of this name instead of starting anew
    total_steps: int | None = None  # for progress and ETA


@dataclass(frozen=True)
class Step(Message):
    step: int
    metrics: dict[str, float]  # finite values only
    nonfinite: tuple[str, ...]  # keys whose value was null, NaN or ±Inf
    time: float | None
    text: dict[str, str] = field(default_factory=dict)  # categorical keys: string values
    left_out: dict[str, str] = field(default_factory=dict)  # key -> why it was not taken
    nulls: tuple[str, ...] = ()  # those of `nonfinite` whose value was null (kind unknown)


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
    columns are numpy unicode arrays ('' for null); text columns are lists (None for null); an
    absent optional column is None."""

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
    # Text columns: one str or None per sample, or packed as it came (`wire.texts`,
    # `TextColumn.values()` gives the list); None = the message has no such column.
    prompt: list[str | None] | TextColumn | None = None
    completion: list[str | None] | TextColumn | None = None
    text_bytes: int = 0  # UTF-8 bytes of every prompt and completion string
    # String columns of few distinct values, as the validator saw them: {column: (its sorted
    # distinct values, each sample's index into them)} — what np.unique(column,
    # return_inverse=True) gives, without sorting the column's strings again.
    dictionaries: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    # Fields that are no samples column (a misspelt `advantages`): {name: why}, not stored
    # and named in the ack's `left_out`.
    left_out: dict[str, str] = field(default_factory=dict)

    @property
    def has_text(self) -> bool:
        return self.prompt is not None or self.completion is not None


@dataclass(frozen=True)
class Barrier(Message):
    """Acked once everything acknowledged before it for the run is aggregated and readable."""


@dataclass(frozen=True)
class Heartbeat(Message):
    """The trainer is alive: stores nothing but the run's last-seen time (no run is created)."""


@dataclass(frozen=True)
class Labels:
    """A column of labels, dictionary-encoded: `values` are the distinct labels (a string, or
    an int where the wire allows one: `server`, `device`, `sample_id`, `group_id`), `codes`
    (int32, one per row) index them; -1 = null."""

    values: list[str | int]
    codes: np.ndarray

    def at(self, i: int) -> str | int | None:
        code = int(self.codes[i])
        return None if code < 0 else self.values[code]


@dataclass(frozen=True)
class Events(Message):
    """Columnar spans and instants (docs/protocol.md `events`), one row per event. Integer
    columns are int64 with -1 for null (they are ≥ 0 on the wire); `end` is NaN for an
    instant; `status` codes index EVENT_STATUSES (-1 = null)."""

    n: int
    name: Labels  # no nulls
    start: np.ndarray  # float64 unix s
    end: np.ndarray  # float64 unix s ≥ start, NaN = an instant
    source: Labels  # no nulls ('trainer' when not given)
    step: np.ndarray  # int64
    rank: np.ndarray  # int64
    server: Labels
    slot: np.ndarray  # int64
    status: np.ndarray  # int8
    tokens: np.ndarray  # int64
    sample_id: Labels
    group_id: Labels
    left_out: dict[str, str] = field(default_factory=dict)  # unknown fields: {name: why}


@dataclass(frozen=True)
class Gauges(Message):
    """Columnar time series points (docs/protocol.md `gauges`), one row per point."""

    n: int
    time: np.ndarray  # float64 unix s
    name: Labels  # no nulls
    value: np.ndarray  # float64, NaN = null or not finite
    host: Labels
    device: Labels
    left_out: dict[str, str] = field(default_factory=dict)


AnyMessage = RunStart | Step | Samples | Ranges | RunEnd | Barrier | Heartbeat | Events | Gauges


def require(obj: dict[str, Any], name: str) -> Any:
    if name not in obj or obj[name] is None:
        raise ProtocolError("missing_field", name, f"field {name!r} is required")
    return obj[name]


def opt_number(obj: dict[str, Any], name: str) -> float | None:
    value = obj.get(name)
    if value is None:
        return None
    if type(value) not in _NUMBER_TYPES or not math.isfinite(value):
        raise ProtocolError("wrong_type", name, f"{name} must be a finite number")
    return float(value)


MAX_UNIX_SECONDS = 1e10  # year 2286: a larger `time` is milliseconds or garbage
MAX_CONFIG_DEPTH = 64


def opt_time(obj: dict[str, Any], name: str = "time") -> float | None:
    """An optional unix time in seconds (0 ≤ t < 1e10)."""
    value = opt_number(obj, name)
    if value is not None and not 0 <= value < MAX_UNIX_SECONDS:
        hint = " (milliseconds? send seconds)" if 1e12 <= value < 1e14 else ""
        raise ProtocolError("invalid", name, f"{name} must be unix seconds between 0 and "
                            f"{MAX_UNIX_SECONDS:.0e}, got {value:g}{hint}")
    return value


def check_json_tree(value: Any, field: str, max_depth: int = MAX_CONFIG_DEPTH) -> None:
    """A JSON document the database can store: objects with string keys, lists, strings,
    finite numbers, bools and null, at most `max_depth` deep, no NUL character in a key or
    string (PostgreSQL's jsonb cannot hold one; refused on every backend). Iterative (no
    recursion limit to hit); raises ProtocolError naming `field` and the path of the bad
    part."""
    stack: list[tuple[Any, str, int]] = [(value, field, 0)]
    while stack:
        node, path, depth = stack.pop()
        if depth > max_depth:
            raise ProtocolError("invalid", field, f"{path[:80]}… is nested more than "
                                f"{max_depth} deep")
        kind = type(node)
        if kind is dict:
            for key, child in node.items():
                if type(key) is not str:
                    raise ProtocolError("wrong_type", field, f"{path} has a non-string key")
                if "\x00" in key:
                    raise ProtocolError("invalid", field, f"{path} has a key with a NUL "
                                        "character")
                stack.append((child, f"{path}.{key}", depth + 1))
        elif kind is list:
            stack.extend((child, f"{path}[{i}]", depth + 1) for i, child in enumerate(node))
        elif kind is float:
            if not math.isfinite(node):
                raise ProtocolError("invalid", field, f"{path} is {node}, not a finite number")
        elif kind is int:
            if abs(node) >= 2**63:
                raise ProtocolError("invalid", field, f"{path} is an integer out of range")
        elif kind is str:
            if "\x00" in node:
                raise ProtocolError("invalid", field, f"{path} contains a NUL character")
        elif kind not in (bool, type(None)):
            raise ProtocolError("wrong_type", field, f"{path} is a {kind.__name__}; a config "
                                "holds only JSON values")


def step_number(value: Any, name: str) -> int:
    if type(value) is not int:
        raise ProtocolError("wrong_type", name, f"{name} must be an integer")
    if value < 0:
        raise ProtocolError("invalid", name, f"{name} must be ≥ 0, got {value}")
    if value >= 2**63:
        raise ProtocolError("invalid", name, f"{name} is too large")
    return value


