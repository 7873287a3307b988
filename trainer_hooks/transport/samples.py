"""One `log_samples` call, validated and converted to columns on the sender thread.

`make_chunk` turns whatever the caller passed (lists, numpy arrays, tensors, scalars shared by
every sample) into a `SampleChunk` of the wire's sample columns (`wire.columns`): numeric
columns as float64 arrays (NaN = null), ids, strings and texts (`prompt`, `completion`) as
lists. A bad optional column or metric is left out and described; a bad required column
(reward, ids, step, env, discard reason) raises `SampleError` and the call is dropped. Text is
bounded here: a sample whose text alone exceeds the protocol's per-message text limit loses it
(described), and with `text_per_group` only k samples of each group keep theirs (`PerGroup`,
`keep_per_group`).
"""

from __future__ import annotations

import functools
import math
import operator
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from trainer_hooks.wire.protocol import (
    DEFAULT_MAX_TEXT_BYTES_PER_MESSAGE,
    DISCARD_REASONS,
    MAX_ID_CHARS,
    MAX_KEY_CHARS,
    OPTIONAL_LABEL_COLUMNS,
    OPTIONAL_NUMBER_COLUMNS,
    TEXT_COLUMNS,
    ProtocolError,
    check_key,
)

# which k samples of a group keep their text (`text_per_group`): the highest rewards, the
# lowest, half of each (what "best vs worst" compares), or any k
TEXT_PICKS = ("best", "worst", "best_worst", "random")
TEXT_OVERHEAD = 5  # estimated encoded bytes of a string beyond its UTF-8 bytes
_ID_TYPES = frozenset({str, int})
_INT = frozenset({int})
_STRING_TYPES = frozenset({str, type(None)})
_RNG = np.random.default_rng()
_VALID_NAMES: set[str] = set()  # metric names check_key passed (it depends on nothing else)


class SampleError(ValueError):
    """A `log_samples` call that must be dropped whole (its required columns are unusable)."""


@dataclass
class SampleChunk:
    """One validated `log_samples` call: numeric columns as float64 arrays (NaN = null),
    ids and strings as lists. `step` and `env` are scalars when shared by every sample."""

    n: int
    step: int | np.ndarray
    sample_id: list[Any] | np.ndarray  # int64 when given as an integer array
    group_id: list[Any] | np.ndarray
    reward: np.ndarray
    env: str | None | list[str | None]
    time: float | np.ndarray
    floats: dict[str, np.ndarray]
    strings: dict[str, list[str | None]]
    metrics: dict[str, np.ndarray]
    nbytes: int
    texts: dict[str, list[str | None]] = field(default_factory=dict)
    # estimated encoded bytes of each sample's texts (None: no text), part of `nbytes`
    text_bytes: np.ndarray | None = None
    # label columns dictionary-encoded: (distinct values, an int8 code per sample, -1 for
    # None) — a `strings` column given as one value for all, and with `make_chunk`'s
    # `code_lists` each label list of at most MAX_CODED_VALUES values (`_local_codes`)
    codes: dict[str, tuple[list[str], np.ndarray]] = field(default_factory=dict)

    @property
    def base_bytes(self) -> float:
        """Estimated encoded bytes of one sample without its text."""
        text = 0 if self.text_bytes is None else int(self.text_bytes.sum())
        return (self.nbytes - text) / max(self.n, 1)

    def part(self, a: int, b: int) -> SampleChunk:
        def cut(v: Any) -> Any:
            return v[a:b] if isinstance(v, (list, np.ndarray)) else v

        text = None if self.text_bytes is None else self.text_bytes[a:b]
        nbytes = int(self.base_bytes * (b - a)) + (0 if text is None else int(text.sum()))
        return SampleChunk(
            b - a, cut(self.step), self.sample_id[a:b], self.group_id[a:b], self.reward[a:b],
            cut(self.env), cut(self.time), {k: v[a:b] for k, v in self.floats.items()},
            {k: v[a:b] for k, v in self.strings.items()},
            {k: v[a:b] for k, v in self.metrics.items()},
            nbytes, {k: v[a:b] for k, v in self.texts.items()}, text,
            {k: (v, c[a:b]) for k, (v, c) in self.codes.items()})

    def fit(self, a: int, room: float, text_room: float) -> int:
        """How many samples from `a` on fit in `room` estimated bytes with at most
        `text_room` bytes of text (at least 0)."""
        per = max(self.base_bytes, 1e-9)
        if self.text_bytes is None:
            return max(0, int(room / per))
        text = np.cumsum(self.text_bytes[a:])
        total = text + per * np.arange(1, text.size + 1)
        return int(min(np.searchsorted(total, room, side="right"),
                       np.searchsorted(text, text_room, side="right")))

    def take(self, keep: np.ndarray) -> SampleChunk:
        """The samples where the boolean mask `keep` is true (rare path: restart dedupe)."""
        idx = np.flatnonzero(keep)
        out = self.part(0, self.n)
        pick = idx.tolist()

        def sel(v: Any) -> Any:
            if isinstance(v, np.ndarray):
                return v[idx]
            return [v[i] for i in pick] if isinstance(v, list) else v

        for name in ("step", "sample_id", "group_id", "reward", "env", "time", "text_bytes"):
            setattr(out, name, sel(getattr(out, name)))
        for d in (out.floats, out.strings, out.metrics, out.texts):
            for k in d:
                d[k] = sel(d[k])
        out.codes = {k: (v, c[idx]) for k, (v, c) in out.codes.items()}
        out.n = len(pick)
        out.nbytes = int(self.base_bytes * out.n) + (
            0 if out.text_bytes is None else int(out.text_bytes.sum()))
        return out

    def drop_text(self, drop: np.ndarray) -> None:
        """Forget the texts of the samples where the boolean mask `drop` is true."""
        if self.text_bytes is None or not drop.any():
            return
        for name, values in self.texts.items():
            self.texts[name] = [None if d else v for v, d in zip(values, drop.tolist(),
                                                                   strict=True)]
        self.nbytes -= int(self.text_bytes[drop].sum())
        self.text_bytes = np.where(drop, 0, self.text_bytes)

    def label(self, name: str) -> str | None | list[str | None]:
        """A label column (`env`, `stop_reason`, `discard_reason`): a list, or one value for
        all (None: none)."""
        return self.env if name == "env" else self.strings.get(name)

    def label_codes(self, name: str, position: dict[str | None, int]) -> np.ndarray:
        """A label column as int8 codes, `position` mapping each of its values to one (None
        to -1): from the call's own codes (`codes`, which a list column must have) or its one
        value for all."""
        value = self.label(name)
        if not isinstance(value, list):
            return np.full(self.n, position[value], dtype=np.int8)
        values, local = self.codes[name]
        table = np.array([position[v] for v in values] + [-1], dtype=np.int8)  # -1: the last
        out: np.ndarray = table[local]
        return out

    def identities(self) -> list[tuple[int, tuple[str, str, str]]]:
        """(step, (env, group id, sample id)) per sample: its identity across restarts."""
        n = self.n
        envs = self.env if isinstance(self.env, list) else [self.env] * n
        steps = self.step.tolist() if isinstance(self.step, np.ndarray) else [self.step] * n
        keys = zip([e or "" for e in envs], map(str, self.group_id), map(str, self.sample_id),
                   strict=True)
        return list(zip(steps, keys, strict=True))


def make_chunk(step: Any, sample_id: Any, group_id: Any, reward: Any, env: Any,
               metrics: Any, columns: Mapping[str, Any], t: Any,
               problems: list[str], *, code_lists: bool = False) -> SampleChunk:
    """Validate and convert one call's columns. A bad optional column or metric is left out
    (described in `problems`); a bad required column raises SampleError. With `code_lists`,
    label columns given as lists are dictionary-encoded too (`_local_codes`)."""
    rew = _floats(reward, None, "reward")
    n = rew.size
    if n == 0:
        raise SampleError("reward: no samples")
    codes: dict[str, tuple[list[str], np.ndarray]] = {}
    distinct: dict[str, set[str | None]] = {}  # of each label column given as a list
    floats, strings, texts, policy = _optional_columns(columns, n, problems, codes, distinct)
    cols = _metric_columns(metrics, n, problems)
    sid, gid = _ids(sample_id, n, "sample_id"), _ids(group_id, n, "group_id")
    chunk = SampleChunk(n, _step(step, n), sid, gid, rew, _env(env, n, distinct),
                        t if isinstance(t, float) else _floats(t, n, "time"),
                        floats, strings, cols, 0, codes=codes)
    for name, seen in distinct.items() if code_lists else ():
        rows = chunk.label(name)
        assert isinstance(rows, list)
        _local_codes(rows, seen, name, codes)
    per_sample = 9 * (3 + len(floats) + len(cols)) + 6 * len(strings)
    chunk.nbytes = n * per_sample + _id_bytes(sid) + _id_bytes(gid)
    if texts:
        _add_texts(chunk, texts, problems)
        if policy is not None and policy.k < n:
            chunk.drop_text(~keep_per_group(rew, gid, policy.k, policy.pick))
    return chunk


def _optional_columns(columns: Mapping[str, Any], n: int, problems: list[str],
                      codes: dict[str, tuple[list[str], np.ndarray]],
                      distinct: dict[str, set[str | None]]
                      ) -> tuple[dict[str, np.ndarray], dict[str, list[str | None]],
                                 dict[str, list[str | None]], PerGroup | None]:
    floats: dict[str, np.ndarray] = {}
    strings: dict[str, list[str | None]] = {}
    texts: dict[str, list[str | None]] = {}
    policy = None
    for name, values in columns.items():
        if isinstance(values, PerGroup):
            policy, values = values, values.values
        if values is None:
            continue
        try:
            if name in OPTIONAL_NUMBER_COLUMNS:
                floats[name] = _floats(values, n, name)
            elif name in OPTIONAL_LABEL_COLUMNS:
                strings[name] = _strings(values, n, name, codes, distinct)
            elif name in TEXT_COLUMNS:
                texts[name] = _texts(values, n, name, problems)
            else:
                problems.append(f"unknown column {name!r} left out")
        except SampleError as exc:
            if name == "discard_reason":
                raise
            problems.append(f"{exc}; column left out")
    bad = {v for v in strings.get("discard_reason", ()) if v is not None} - set(DISCARD_REASONS)
    if bad:
        raise SampleError(f"discard_reason: unknown {sorted(bad)}; expected None or one of "
                          f"{DISCARD_REASONS}")
    return floats, strings, texts, policy


# ---------------------------------------------------------------- text


@dataclass(frozen=True)
class PerGroup:
    """A text column whose text only `k` samples of each group keep (`text_per_group`,
    `text_pick`): wrapped on the caller's thread, selected on the sender thread."""

    values: Any
    k: int
    pick: str


def _texts(values: Any, n: int, name: str, problems: list[str]) -> list[str | None]:
    """A text column: N strings or Nones (one string: the same for every sample). A string
    that is not valid Unicode (a lone surrogate) has its bad characters replaced."""
    if isinstance(values, str):
        out: list[Any] = [values] * n
    else:
        try:
            out = list(values.tolist() if isinstance(values, np.ndarray) else values)
        except TypeError:
            raise SampleError(f"{name}: must be a list of strings") from None
    if len(out) != n:
        raise SampleError(f"{name}: {len(out)} values; reward has {n}")
    kinds = set(map(type, out))
    if not kinds <= {str, type(None)}:
        if not all(v is None or isinstance(v, str) for v in out):
            raise SampleError(f"{name}: must hold strings or None")
        out = [None if v is None else str(v) for v in out]  # numpy str_ and the like
    for i, v in enumerate(out):
        if v is not None and not v.isascii():
            try:
                v.encode("utf-8")
            except UnicodeEncodeError:
                out[i] = v.encode("utf-8", "replace").decode("utf-8")
                problems.append(f"{name}: sample {i} is not valid Unicode; its bad "
                                "characters were replaced")
    return out


def _utf8(values: list[str | None]) -> np.ndarray:
    return np.fromiter((0 if v is None else len(v) if v.isascii() else len(v.encode("utf-8"))
                        for v in values), dtype=np.int64, count=len(values))


def _add_texts(chunk: SampleChunk, texts: dict[str, list[str | None]],
               problems: list[str]) -> None:
    """Attach the text columns, leaving out the text of a sample larger than one message
    may carry (its longer column first) so the server never refuses the message for it."""
    limit = DEFAULT_MAX_TEXT_BYTES_PER_MESSAGE
    sizes = {name: _utf8(values) for name, values in texts.items()}
    total: np.ndarray = np.sum(list(sizes.values()), axis=0)  # per sample, every column
    if (total > limit).any():
        for name in sorted(sizes, key=lambda k: -int(sizes[k].max())):
            over = total > limit
            if not over.any():
                break
            drop = over & (sizes[name] > 0)
            texts[name] = [None if d else v for v, d in zip(texts[name], drop.tolist(),
                                                           strict=True)]
            total = total - np.where(drop, sizes[name], 0)
            sizes[name] = np.where(drop, 0, sizes[name])
            problems.append(f"{name}: {int(drop.sum())} sample(s) with more than {limit:,} "
                            f"bytes of text; their {name} left out")
    present: np.ndarray = np.sum([sizes[name] > 0 for name in texts], axis=0)
    chunk.texts = texts
    chunk.text_bytes = total + TEXT_OVERHEAD * present
    chunk.nbytes += int(chunk.text_bytes.sum())


def keep_per_group(reward: np.ndarray, group_id: list[Any] | np.ndarray, k: int,
                   pick: str) -> np.ndarray:
    """Which samples keep their text when only `k` of each group do (a boolean mask):
    `best` the k highest rewards, `worst` the k lowest, `best_worst` ⌈k/2⌉ highest and ⌊k/2⌋
    lowest, `random` any k. A null reward ranks after every number; ties keep call order."""
    n = reward.size
    groups = np.unique(np.array([str(g) for g in group_id]), return_inverse=True)[1]
    position = np.arange(n)
    finite = np.isfinite(reward)

    def ranks(key: np.ndarray) -> np.ndarray:
        order = np.lexsort((position, key, groups))
        starts = np.flatnonzero(np.diff(groups[order], prepend=-1))
        rank = np.empty(n, dtype=np.int64)
        rank[order] = position - np.repeat(starts, np.diff(np.append(starts, n)))
        return rank

    if pick == "random":
        return ranks(_RNG.random(n)) < k
    best = ranks(np.where(finite, -reward, np.inf))
    if pick == "best":
        return best < k
    if pick == "worst":
        return ranks(np.where(finite, reward, np.inf)) < k
    top = best < math.ceil(k / 2)  # then the worst of the others: ties give two samples
    return top | (ranks(np.where(finite & ~top, reward, np.inf)) < k // 2)


def _metric_columns(metrics: Any, n: int, problems: list[str]) -> dict[str, np.ndarray]:
    cols: dict[str, np.ndarray] = {}
    for name, values in (metrics or {}).items():
        try:
            if type(name) is not str or name not in _VALID_NAMES:
                check_key(name, f"metrics.{name}", kind="metric name")
                if len(_VALID_NAMES) < 10_000:
                    _VALID_NAMES.add(name)
            cols[name] = _floats(values, n, f"metrics.{name}")
        except (ProtocolError, SampleError) as exc:
            problems.append(f"{exc}; metric left out")
    return cols
def _floats(values: Any, n: int | None, name: str) -> np.ndarray:
    if type(values) is np.ndarray and values.dtype == _F64 and values.ndim == 1:
        if n is not None and values.size != n:  # (the common case, first)
            raise SampleError(f"{name}: {values.size} values; reward has {n}")
        return values
    if hasattr(values, "detach"):  # a torch tensor, converted here off the caller's thread
        values = values.detach().cpu().numpy()
    packed = packed_numbers(values)  # a list of numbers (what a reward function returns)
    if packed is not None:
        if n is not None and packed.size != n:
            raise SampleError(f"{name}: {packed.size} values; reward has {n}")
        return packed
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise SampleError(f"{name}: not numbers ({exc})") from None
    if arr.ndim == 0 and n is not None:
        return np.full(n, float(arr))
    if arr.ndim != 1:
        raise SampleError(f"{name}: must be a flat list of numbers")
    if n is not None and arr.size != n:
        raise SampleError(f"{name}: {arr.size} values; reward has {n}")
    return arr


_NUMBERS = (float, int)
_F64 = np.dtype(np.float64)


def packed_numbers(values: Any) -> np.ndarray | None:
    """A list of Python numbers as float64 in one C call (`_packed`), as a number column is
    converted first (`_floats`; the client packs a burst's lists with it too); None for
    anything else, which `_floats` goes on to decide."""
    if type(values) is list and values and type(values[0]) in _NUMBERS:
        return _packed(values, "d")
    return None


@functools.lru_cache(maxsize=64)
def _layout(n: int, code: str) -> struct.Struct:
    return struct.Struct(f"={n}{code}")


def _packed(values: list[Any], code: str) -> np.ndarray | None:
    """A list of Python numbers as a float64 (`code` "d") or int64 ("q") array, converted in
    one C call (about twice as fast as numpy's conversion of a list); None when some value is
    not a number struct takes (None, a string, an int beyond int64): numpy decides those."""
    out = np.empty(len(values), dtype=np.float64 if code == "d" else np.int64)
    try:
        _layout(len(values), code).pack_into(out.data, 0, *values)
    except (struct.error, TypeError, OverflowError):
        return None
    return out


def _ids(values: Any, n: int, name: str) -> list[Any] | np.ndarray:
    if isinstance(values, (str, int)) and name == "group_id":
        return [values] * n
    if type(values) is list and values and type(values[0]) is int:  # (from a reward function)
        packed = _int_ids(values)
        if packed is not None:
            if packed.size != n:
                raise SampleError(f"{name}: {packed.size} values; reward has {n}")
            return packed
    if type(values) is not np.ndarray and hasattr(values, "detach"):
        values = values.detach().cpu().numpy()
    if isinstance(values, np.ndarray) and values.ndim == 1 and values.dtype.kind in "iu" and (
            values.dtype.kind == "i" or not values.size or int(values.max()) < 2**63):
        if values.size != n:
            raise SampleError(f"{name}: {values.size} values; reward has {n}")
        return values.astype(np.int64)  # a copy, sent as a typed array (wire.arrays)
    try:
        out = values.tolist() if isinstance(values, np.ndarray) else list(values)
    except TypeError:
        raise SampleError(f"{name}: must be a list") from None
    if len(out) != n:
        raise SampleError(f"{name}: {len(out)} values; reward has {n}")
    if _INT.issuperset(map(type, out)):  # sent as a typed array, as an integer array's are
        packed = _packed(out, "q")  # (issuperset: no set built, and it stops at a string)
        if packed is not None:  # (else beyond int64: a list, as the wire allows)
            return packed
    kinds = set(map(type, out))
    if not kinds <= _ID_TYPES:
        out = [_coerce_id(v, name) for v in out]
        kinds = set(map(type, out))
    longest = max(map(len, out)) if kinds == {str} else \
        max((len(v) for v in out if type(v) is str), default=0)
    if longest > MAX_ID_CHARS:
        raise SampleError(f"{name}: ids are limited to {MAX_ID_CHARS} characters")
    return out


def _int_ids(values: list[Any]) -> np.ndarray | None:
    """A list of integer ids as int64, or None when it may hold something else (a string, a
    bool, an int beyond int64): `_ids` then looks at every value's type."""
    packed = _packed(values, "q")
    if packed is None or not ints_only(values, packed.view(np.uint64)):
        return None
    return packed


def ints_only(values: list[Any], packed: np.ndarray) -> bool:
    """Whether a list that packed as int64 (`packed`, viewed as uint64) held Python ints only.
    A bool packs as 0 or 1, so every value's type is looked at (which costs twice the
    conversion) only when some value is 0 or 1."""
    return not bool((packed < 2).any()) or _INT.issuperset(map(type, values))


def _coerce_id(v: Any, name: str) -> str | int:
    if type(v) is str or type(v) is int:
        return v
    if v is None or isinstance(v, (bool, float)):
        raise SampleError(f"{name}: {v!r} is not an id (strings or integers)")
    if isinstance(v, np.integer):
        return int(v)
    return str(v)


def _id_bytes(ids: list[Any] | np.ndarray) -> int:
    try:
        return sum(map(len, ids)) + 2 * len(ids)
    except TypeError:
        return 9 * len(ids)


def _step(step: Any, n: int) -> int | np.ndarray:
    if isinstance(step, (list, tuple, np.ndarray)):
        arr = np.asarray(step)
        if arr.ndim != 1 or arr.size != n or (arr.size and arr.dtype.kind not in "iu"):
            raise SampleError(f"step: a list of {n} integers, or one integer")
        arr = arr.astype(np.int64)
        if arr.min() < 0:
            raise SampleError("step: must be ≥ 0")
        return int(arr[0]) if (arr == arr[0]).all() else arr
    if isinstance(step, (bool, float)):
        raise SampleError(f"step: {step!r} is not an integer")
    try:
        value = operator.index(step)
    except TypeError:
        raise SampleError(f"step: {step!r} is not an integer") from None
    if value < 0:
        raise SampleError("step: must be ≥ 0")
    return value


def _env(env: Any, n: int, distinct: dict[str, set[str | None]]
         ) -> str | None | list[str | None]:
    """`env`: one name for all (None: none) or a list (its distinct values in `distinct`)."""
    if env is None or isinstance(env, str):
        if env is not None and len(env) > MAX_KEY_CHARS:
            raise SampleError(f"env: names are limited to {MAX_KEY_CHARS} characters")
        return env
    out, seen = _distinct_strings(env, n, "env")
    if len(seen) == 1:
        return out[0]
    distinct["env"] = seen
    return out


def _strings(values: Any, n: int, name: str, codes: dict[str, tuple[list[str], np.ndarray]],
             distinct: dict[str, set[str | None]]) -> list[str | None]:
    """A label column as a list: one value for all already coded (`codes`), a list's
    distinct values in `distinct`."""
    if isinstance(values, str):
        codes[name] = [values], np.zeros(n, dtype=np.int8)
        return [values] * n
    out, distinct[name] = _distinct_strings(values, n, name)
    return out


MAX_CODED_VALUES = 127  # distinct labels that one-byte codes index (-1: None)


def _local_codes(out: list[str | None], distinct: set[str | None], name: str,
                 codes: dict[str, tuple[list[str], np.ndarray]]) -> None:
    """A label list of at most MAX_CODED_VALUES distinct values dictionary-encoded into
    `codes[name]` (the batcher sends it so: `batching._coded`): one lookup per sample in C
    (`operator.itemgetter` into `bytes`; `np.fromiter` over a map took twice that). That is
    more than msgpack takes to pack the strings (beside a training loop ~45 ns a sample
    against ~15: +30 µs a step of 512 samples on the sender thread, bench/RESULTS.md), so
    only a sender that is not the trainer's thread does it (`make_chunk`'s `code_lists`)."""
    if len(distinct) > MAX_CODED_VALUES + 1:
        return
    values = sorted(v for v in distinct if v is not None)  # (the same message every time)
    if len(values) > MAX_CODED_VALUES:
        return
    position: dict[str | None, int] = dict(zip(values, range(len(values)), strict=True))
    position[None] = 255  # -1 as int8
    if len(out) == 1:  # (itemgetter of one key gives the value, not a tuple)
        data = bytes((position[out[0]],))
    else:
        data = bytes(operator.itemgetter(*out)(position))
    codes[name] = values, np.frombuffer(data, dtype=np.int8)


def _distinct_strings(values: Any, n: int, name: str
                      ) -> tuple[list[str | None], set[str | None]]:
    """A label column as a list, and its distinct values (few: the checks look at those)."""
    out = list(values.tolist() if isinstance(values, np.ndarray) else values)
    if len(out) != n:
        raise SampleError(f"{name}: {len(out)} values; reward has {n}")
    try:
        "".join(out)  # all strings (in C: a third of a type check per value)
    except TypeError:
        if not set(map(type, out)) <= _STRING_TYPES:
            raise SampleError(f"{name}: must hold strings or None") from None
    distinct = set(out)
    if any(len(v) > MAX_KEY_CHARS for v in distinct if v is not None):
        raise SampleError(f"{name}: values are limited to {MAX_KEY_CHARS} characters")
    return out, distinct
