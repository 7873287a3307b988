"""The columns of a `samples` message, defined once, and their validation.

**The sample column table.** A `samples` message carries N samples column by column: `step`,
the ids, `reward`, optional per-sample columns and a `metrics` object of number columns
(docs/protocol.md, `samples`). The tuples below name every column and its kind; the sender
builds its messages from them (`trainer_hooks.transport`) and the server stores them by them
(`ingest.core.columns`). Nothing else lists them.

**Validation.** `validate_samples` decodes a columnar message straight into numpy columns (the
text columns `prompt` and `completion` as lists of strings); every problem is a
`ProtocolError` naming the offending field. The string columns `env`, `stop_reason` and
`discard_reason` may come dictionary-encoded, `{"values": [...], "codes": [...]}`
(`trainer_hooks.wire.labels`, as events' labels do): each value is checked once and the codes
with numpy, and the column and its dictionary are exactly what the list would give.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection
from typing import Any

import numpy as np

from trainer_hooks.wire.arrays import is_array
from trainer_hooks.wire.labels import encoded, where
from trainer_hooks.wire.schema import (
    _ID_TYPES,
    _NULLABLE_NUMBER_TYPES,
    DEFAULT_MAX_TEXT_BYTES_PER_MESSAGE,
    DISCARD_REASONS,
    MAX_ID_CHARS,
    MAX_KEY_CHARS,
    MAX_METRICS_PER_MESSAGE,
    MAX_SAMPLES_PER_MESSAGE,
    MAX_STEPS_PER_MESSAGE,
    MAX_UNIX_SECONDS,
    ProtocolError,
    Samples,
    check_key,
    deceptive,
    opt_time,
    require,
    shown,
    step_number,
)
from trainer_hooks.wire.texts import PackedError, PackedText, TextColumn, TooMuchText

# ---------------------------------------------------------------- the sample column table

# Ids: one string or integer per sample (required).
ID_COLUMNS = ("sample_id", "group_id")
# Optional numbers per sample (null: unknown), one list of N or absent.
OPTIONAL_NUMBER_COLUMNS = ("advantage", "prompt_tokens", "completion_tokens",
                           "off_policy_steps")
# Optional short strings per sample (at most MAX_KEY_CHARS; `discard_reason` one of
# DISCARD_REASONS or null).
OPTIONAL_LABEL_COLUMNS = ("stop_reason", "discard_reason")
# Sample text: one string or null per sample, any length up to the text limit per message,
# stored apart from the numbers.
TEXT_COLUMNS = ("prompt", "completion")
# Every optional per-sample column (the keywords of `Client.log_samples` besides `time`).
OPTIONAL_COLUMNS = (*OPTIONAL_NUMBER_COLUMNS, *OPTIONAL_LABEL_COLUMNS, *TEXT_COLUMNS)
# By kind, as the server stores them: the number columns (`reward` required; `time` one number
# for all or one per sample) and the string columns (`env` one name for all or one per sample).
NUMBER_COLUMNS = ("reward", *OPTIONAL_NUMBER_COLUMNS, "time")
# The label columns, which may also come dictionary-encoded (`_coded_strings`).
LABEL_COLUMNS = ("env", *OPTIONAL_LABEL_COLUMNS)
STRING_COLUMNS = (*ID_COLUMNS, *LABEL_COLUMNS)
# Every per-sample column but `metrics` (`step`, `env` and `time` may be one value for all).
SAMPLE_COLUMNS = ("step", *ID_COLUMNS, "reward", "env", *OPTIONAL_COLUMNS, "time")

TextValues = list[str | None] | TextColumn  # a text column as validated

# The fields every message has (docs/protocol.md, "Messages"); with the columns above and
# `metrics`, all a samples message may hold: another field is left out and named in the ack.
ENVELOPE = ("v", "id", "type", "run", "incarnation")
_KNOWN_FIELDS = frozenset((*ENVELOPE, *SAMPLE_COLUMNS, "metrics"))
MAX_UNKNOWN_FIELDS = 100  # more is no misspelling: the message is refused

# ---------------------------------------------------------------- text limit

_text_limit = DEFAULT_MAX_TEXT_BYTES_PER_MESSAGE


def set_text_limit(max_bytes: int) -> None:
    """The most UTF-8 bytes of `prompt` and `completion` text one samples message may carry.
    The server sets it from its settings (ingest.core.texts); the default is the protocol's."""
    global _text_limit
    if max_bytes < 0:
        raise ValueError("the text limit must be ≥ 0")
    _text_limit = int(max_bytes)


def text_limit() -> int:
    return _text_limit


# ---------------------------------------------------------------- validation

_NONE = np.array([None], dtype=object)  # compared with an object column: where it is null


def validate_samples(obj: dict[str, Any], mid: str, mtype: str, run: str) -> Samples:
    """Check a `samples` message's columns (the table above) and decode them into numpy."""
    reward_list = require(obj, "reward")
    if not isinstance(reward_list, list) and not is_array(reward_list):
        raise ProtocolError("wrong_type", "reward", "reward must be a list")
    n = len(reward_list)
    if n == 0:
        raise ProtocolError("invalid", "reward", "a samples message needs at least one sample")
    if n > MAX_SAMPLES_PER_MESSAGE:
        raise ProtocolError(
            "too_many", "reward", f"{n} samples; the limit is {MAX_SAMPLES_PER_MESSAGE}"
        )
    dictionaries: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    step_value = require(obj, "step")
    if isinstance(step_value, list) or is_array(step_value):
        step = _int_column(step_value, "step", n)
        distinct = _distinct_count(step)
        if distinct > MAX_STEPS_PER_MESSAGE:
            raise ProtocolError(
                "too_many", "step", f"{distinct} distinct steps; a samples message may span at "
                f"most {MAX_STEPS_PER_MESSAGE} (split it into several messages)")
    else:
        step = np.full(n, step_number(step_value, "step"), dtype=np.int64)
    discard = _str_column(obj, "discard_reason", n, allow_scalar=True, into=dictionaries,
                          allowed=DISCARD_REASONS)
    if discard is None:
        discard = _blank(n, "discard_reason", dictionaries)
    env = _str_column(obj, "env", n, allow_scalar=True, into=dictionaries)
    if env is None:
        env = _blank(n, "env", dictionaries)
    prompt, completion, text_bytes = _text_columns(obj, n)
    return Samples(
        mid, mtype, run, n,
        step=step,
        sample_id=_id_column(obj, "sample_id", n),
        group_id=_id_column(obj, "group_id", n),
        reward=_float_column(reward_list, "reward", n),
        env=env,
        advantage=_opt_float_column(obj, "advantage", n),
        prompt_tokens=_opt_float_column(obj, "prompt_tokens", n),
        completion_tokens=_opt_float_column(obj, "completion_tokens", n),
        stop_reason=_str_column(obj, "stop_reason", n, allow_scalar=False, into=dictionaries),
        off_policy_steps=_opt_float_column(obj, "off_policy_steps", n),
        discard_reason=discard,
        time=_time_column(obj, n),
        metrics=_metric_columns(obj.get("metrics"), n),
        prompt=prompt,
        completion=completion,
        text_bytes=text_bytes,
        dictionaries=dictionaries,
        left_out=_unknown_fields(obj),
    )


def _distinct_count(step: np.ndarray) -> int:
    """How many distinct values: counted from the differences when they never go down (a
    trainer sends its steps so; a fifth of a message's validation went to np.unique's sort)."""
    if step.size > 1:
        rises = np.diff(step)
        if not bool((rises < 0).any()):
            return 1 + int(np.count_nonzero(rises))
    return int(np.unique(step).size)


def _unknown_fields(obj: dict[str, Any]) -> dict[str, str]:
    """{field: why} for each field that is no samples column: left out, not silently
    dropped (a misspelt `advantages` must not look stored)."""
    return unknown_fields(obj, _KNOWN_FIELDS, "samples column")


def unknown_fields(obj: dict[str, Any], known: Collection[str], kind: str) -> dict[str, str]:
    """{field: why} for each field of a columnar message that is not in `known` ("not a
    <kind>, left out", with the closest known name); more than MAX_UNKNOWN_FIELDS of them is
    an error."""
    unknown = [name for name in obj if name not in known]
    if len(unknown) > MAX_UNKNOWN_FIELDS:
        raise ProtocolError("too_many", str(unknown[0])[:MAX_KEY_CHARS],
                            f"{len(unknown)} fields that are no {kind}; the limit is "
                            f"{MAX_UNKNOWN_FIELDS}")
    out: dict[str, str] = {}
    for name in unknown:
        label = str(name)[:MAX_KEY_CHARS]
        close = difflib.get_close_matches(label, known, n=1)
        out[label] = f"not a {kind}, left out" + (f" (did you mean {close[0]!r}?)"
                                                   if close else "")
    return out


def _time_column(obj: dict[str, Any], n: int) -> np.ndarray | None:
    """`time`: one unix time for all samples or a list (nulls allowed), each checked as a
    message's `time` is (0 ≤ t < 1e10: milliseconds are refused, not stored as year 55,000)."""
    value = obj.get("time")
    if value is None:
        return None
    if not isinstance(value, list) and not is_array(value):
        t = opt_time(obj)
        return np.full(n, t, dtype=np.float64)
    times = _float_column(value, "time", n)
    with np.errstate(invalid="ignore"):
        bad = np.flatnonzero((times < 0) | (times >= MAX_UNIX_SECONDS))
    if bad.size:
        i = int(bad[0])
        got = float(times[i])
        hint = " (milliseconds? send seconds)" if 1e12 <= got < 1e14 else ""
        raise ProtocolError("invalid", "time", f"time[{i}] must be unix seconds between 0 and "
                            f"{MAX_UNIX_SECONDS:.0e}, got {got:g}{hint}")
    return times


def _check_list(values: Any, name: str, n: int, *, typed: bool = False) -> Any:
    """A list of n values (or, when `typed`, a typed array of n numbers)."""
    if not isinstance(values, list) and not (typed and is_array(values)):
        raise ProtocolError("wrong_type", name, f"{name} must be a list")
    if len(values) != n:
        raise ProtocolError(
            "length_mismatch", name, f"{name} has {len(values)} values; reward has {n}"
        )
    return values


def _float_column(values: Any, name: str, n: int) -> np.ndarray:
    values = _check_list(values, name, n, typed=True)
    if is_array(values):  # a typed array (trainer_hooks.wire.arrays): float64 or int64
        arr = values.astype(np.float64)
    else:
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
    values = _check_list(values, name, n, typed=True)
    if is_array(values):
        if values.dtype.kind != "i":
            raise ProtocolError("wrong_type", name, f"{name} must hold integers")
        arr = values
    else:
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
    values = _check_list(require(obj, name), name, n, typed=True)
    if is_array(values):
        if values.dtype.kind != "i":
            raise ProtocolError("wrong_type", name, f"{name} must hold strings or integers")
        return values
    kinds = set(map(type, values))
    if not kinds <= _ID_TYPES:
        raise ProtocolError("wrong_type", name, f"{name} must hold strings or integers")
    if kinds == {int}:  # kept as integers: sorting and grouping them is much cheaper
        try:
            return np.array(values, dtype=np.int64)
        except OverflowError:
            raise ProtocolError("invalid", name, f"{name} holds an integer out of range") from None
    _refuse_deceptive(map(str, values), name)
    arr = np.array(values, dtype=str)
    if arr.dtype.itemsize // 4 > MAX_ID_CHARS:
        raise ProtocolError("invalid", name, f"{name} values are limited to {MAX_ID_CHARS} chars")
    return arr


def _str_column(obj: dict[str, Any], name: str, n: int, *, allow_scalar: bool,
                into: dict[str, tuple[np.ndarray, np.ndarray]] | None = None,
                allowed: tuple[str, ...] | None = None) -> np.ndarray | None:
    """A string column (a list, dictionary-encoded (`_coded_strings`), or with `allow_scalar`
    one string for every sample) as a numpy unicode array, '' for null; with `allowed`, each
    value null or one of those. A column of few distinct values is checked value by value and
    its dictionary (sorted distinct values, codes) recorded `into` (Samples.dictionaries)."""
    values = obj.get(name)
    if values is None:
        return None
    if isinstance(values, dict):
        return _coded_strings(values, name, n, into, allowed)
    column = _listed_strings(values, name, n, allow_scalar=allow_scalar, into=into)
    if allowed is not None:
        bad = ~np.isin(column, ("", *allowed))
        if bad.any():
            raise ProtocolError("invalid", name, f"unknown {name.replace('_', ' ')} "
                                f"{str(column[bad][0])!r}; expected null or one of {allowed}")
    return column


def _listed_strings(values: Any, name: str, n: int, *, allow_scalar: bool,
                    into: dict[str, tuple[np.ndarray, np.ndarray]] | None) -> np.ndarray:
    """`_str_column` of a list or a scalar."""
    if allow_scalar and isinstance(values, str):
        _refuse_deceptive([values], name)
        one = _checked_strings(np.array([values]), name)
        if into is not None:
            into[name] = (one, np.zeros(n, dtype=np.int64))
        return np.full(n, values)
    values = _check_list(values, name, n)
    if into is not None and n >= FEW_MIN_SAMPLES:
        coded = _few_strings(values, name)
        if coded is not None:
            into[name] = coded
            coded_column: np.ndarray = coded[0][coded[1]]
            return coded_column
    kinds = set(map(type, values))
    if not kinds <= {str, type(None)}:
        raise ProtocolError("wrong_type", name, f"{name} must hold strings or nulls")
    _refuse_deceptive(filter(None, values), name)
    if type(None) in kinds:
        objects = np.array(values, dtype=object)
        objects[np.equal(objects, _NONE)] = ""
        arr = objects.astype(str)
    else:
        arr = np.array(values, dtype=str)
    return _checked_strings(arr, name)


def _coded_strings(value: dict[str, Any], name: str, n: int,
                   into: dict[str, tuple[np.ndarray, np.ndarray]] | None,
                   allowed: tuple[str, ...] | None) -> np.ndarray:
    """A string column sent dictionary-encoded, `{"values": [...], "codes": [...]}`
    (`labels.encoded`): each value checked once by the rules of a listed one (a string of at
    most MAX_KEY_CHARS characters, nothing deceptive, '' allowed; with `allowed`, one of
    those), the codes with numpy, -1 a null ('' as a null in a list). The column and its
    dictionary are exactly what the list of those strings gives: the values some row uses
    ('' for null among them), sorted, and each row's index — np.unique's."""
    values, codes = encoded(value, name, n, empty=True)
    if allowed is not None:
        bad = [v for v in values if v and v not in allowed]
        if bad:
            field = f"{name}.values"
            raise ProtocolError("invalid", field, f"{where(field, values, bad[0], False)} is "
                                f"{bad[0]!r}; expected null or one of {allowed}")
    strings = ["", *values]  # indexed by code + 1: null first
    shifted = codes + 1
    used = np.flatnonzero(np.bincount(shifted, minlength=len(strings))).tolist()
    present = sorted({strings[i] for i in used})  # code-point order, as numpy sorts
    position = dict(zip(present, range(len(present)), strict=True))
    table = np.array([position.get(s, 0) for s in strings], dtype=np.int64)
    uniques = np.array(present, dtype=str)
    rows: np.ndarray = table[shifted]
    if into is not None:
        into[name] = (uniques, rows)
    column: np.ndarray = uniques[rows]
    return column


def _blank(n: int, name: str, into: dict[str, tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """An absent string column that has a value per sample: '' for all, and its dictionary."""
    into[name] = (np.array([""]), np.zeros(n, dtype=np.int64))
    return np.full(n, "", dtype="<U1")


FEW_MIN_SAMPLES = 64  # a string column this long with at most 1/FEW_SHARE distinct values
FEW_SHARE = 8  # ... is dictionary-encoded by `_few_strings`


def _few_strings(values: list[Any], name: str) -> tuple[np.ndarray, np.ndarray] | None:
    """(sorted distinct values, each value's index) of a list of strings with few distinct
    values, each checked once — its type, its characters — not every sample's copy; None when
    there are many, or when any value is not a string (a null, a wrong type: the caller's
    checks of every value decide). A value of another type cannot hide behind an equal string
    among the distinct ones: a decoded frame's values (JSON, msgpack) equal no string but a
    string. The values hold no NUL (refused first), so numpy, which drops trailing ones, keeps
    them distinct."""
    try:
        distinct = dict.fromkeys(values)  # hashing in C: far cheaper than numpy sorting strings
    except TypeError:  # an unhashable value (a list): not a string
        return None
    if len(distinct) * FEW_SHARE > len(values) or not all(type(v) is str for v in distinct):
        return None
    _refuse_deceptive(distinct, name)
    ordered = sorted(distinct)  # code-point order, as numpy sorts
    uniques = _checked_strings(np.array(ordered, dtype=str), name)
    position = dict(zip(ordered, range(len(ordered)), strict=True))
    codes = np.fromiter(map(position.__getitem__, values), dtype=np.int64, count=len(values))
    return uniques, codes


def _refuse_deceptive(strings: Any, name: str) -> None:
    """Labels and ids hold nothing `deceptive` (control, format or invisible characters; a
    NUL too, which numpy's unicode arrays would drop when trailing: 'b\\0' stored as 'b'):
    checked on the strings themselves, one join and one pass in C."""
    bad = deceptive("".join(strings))
    if bad is not None:
        raise ProtocolError("invalid", name, f"{name} values must not contain control or "
                            f"invisible characters ({shown(bad)})")


def _checked_strings(arr: np.ndarray, name: str) -> np.ndarray:
    """At most MAX_KEY_CHARS characters and no control characters, checked column-wise."""
    width = arr.dtype.itemsize // 4
    if width > MAX_KEY_CHARS:
        raise ProtocolError("invalid", name, f"{name} values are limited to {MAX_KEY_CHARS} chars")
    if arr.size and width:
        codes = np.ascontiguousarray(arr).view(np.uint32).reshape(arr.size, width)
        inside = np.arange(width) < np.char.str_len(arr).reshape(-1, 1)
        if np.any(((codes < 32) | (codes == 127)) & inside):
            raise ProtocolError("invalid", name, f"{name} values must not contain control "
                                "characters")
    return arr


def utf8_bytes(strings: list[str]) -> int:
    """The UTF-8 size of some strings (ASCII text is not encoded to count it)."""
    joined = "".join(strings)
    return len(joined) if joined.isascii() else len(joined.encode("utf-8", "surrogatepass"))


def _text_columns(obj: dict[str, Any], n: int
                  ) -> tuple[TextValues | None, TextValues | None, int]:
    """`prompt` and `completion`: lists of N strings or nulls, or packed (`wire.texts`), any
    characters, together at most the text limit in UTF-8 bytes (`set_text_limit`); returns
    both and their bytes."""
    out: list[TextValues | None] = []
    total = 0
    for name in TEXT_COLUMNS:
        values = obj.get(name)
        if values is None:
            out.append(None)
            continue
        if isinstance(values, PackedText):
            try:
                column = values.unpack(n, _text_limit - total)
            except TooMuchText as exc:
                raise ProtocolError("too_large", name, _too_much_packed(name, total + exc.args[0])
                                    ) from None
            except PackedError as exc:
                raise ProtocolError("invalid", name, f"{name}: {exc}") from None
            total += column.nbytes
            out.append(column)
            continue
        values = _check_list(values, name, n)
        kinds = set(map(type, values))
        if not kinds <= {str, type(None)}:
            raise ProtocolError("wrong_type", name, f"{name} must hold strings or nulls")
        strings = [v for v in values if v is not None] if type(None) in kinds else values
        total += utf8_bytes(strings)
        if total > _text_limit:
            raise ProtocolError("too_large", name, _too_much_text(name, values, total))
        out.append(values)
    return out[0], out[1], total


def check_text(msg: Samples) -> None:
    """Wait for the check of the message's packed text columns (begun by `validate_samples`
    on a helper thread when large): one whose text is not what it says is a ProtocolError
    naming it. The server calls it before the message's commit (ingest.write.store)."""
    for name in TEXT_COLUMNS:
        column = getattr(msg, name)
        if isinstance(column, TextColumn):
            try:
                column.text()
            except PackedError as exc:
                raise ProtocolError("invalid", name, f"{name}: {exc}") from None


def _too_much_packed(name: str, total: int) -> str:
    return (f"{name}: the message carries at least {total:,} bytes of prompt and completion "
            f"text; the server takes at most {_text_limit:,} per samples message (split the "
            "samples into smaller messages)")


def _too_much_text(name: str, values: list[str | None], total: int) -> str:
    big = max(range(len(values)), key=lambda i: len(values[i] or ""))
    size = utf8_bytes([values[big] or ""])
    if size > _text_limit:
        return (f"{name}[{big}] is {size:,} bytes of text; the server takes at most "
                f"{_text_limit:,} bytes of prompt and completion text per samples message")
    return (f"{name}: the message carries {total:,} bytes of prompt and completion text; the "
            f"server takes at most {_text_limit:,} per samples message (split the samples into "
            "smaller messages)")


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


