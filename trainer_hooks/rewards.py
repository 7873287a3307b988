"""Reward capture: `RewardResult`, tool metrics, and `RewardRecorder`.

An environment's `compute_reward` returns a `RewardResult(total_reward, sample_metrics)`. To get
every result onto the dashboard with the sample's identity, wrap the function with a recorder
(`@recorder.capture`) or call `recorder.record(result, sample_id=..., group_id=...)`; add the
columns known only later (advantage, tokens, stop reason, off-policy lag, discard reason) with
`recorder.annotate(...)`, then `recorder.flush()` hands the step's samples to the client as
columnar `samples` messages. Tool-calling environments merge `get_tool_metrics(state)`-style
dicts (`total_tool_calls`, `tool_success_rate`, `<name>_calls`, ...) into the sample metrics
with `merge_tool_metrics` or the recorder's `tool_metrics=` argument.

Recording never raises into the caller: problems are logged once and counted in `stats`.
"""

from __future__ import annotations

import functools
import inspect
import logging
import operator
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import msgpack
import numpy as np

from trainer_hooks.protocol import (
    DISCARD_REASONS,
    MAX_ID_CHARS,
    MAX_KEY_CHARS,
    ProtocolError,
    check_key,
)

if TYPE_CHECKING:
    from trainer_hooks.sender import Client

log = logging.getLogger("trainer_hooks.rewards")

Number = float | int


@dataclass
class RewardResult:
    """What `compute_reward` returns: the scalar reward and any per-sample metrics."""

    total_reward: float
    sample_metrics: dict[str, float | None] = field(default_factory=dict)


def as_reward_result(obj: Any) -> RewardResult:
    """A `RewardResult` from one, or from any object with `total_reward` / `sample_metrics`
    attributes (another framework's class), a mapping with those keys, a
    `(reward, metrics)` pair, or a bare number."""
    if isinstance(obj, RewardResult):
        return obj
    if isinstance(obj, Mapping):
        return RewardResult(obj["total_reward"], dict(obj.get("sample_metrics") or {}))
    if hasattr(obj, "total_reward"):
        return RewardResult(obj.total_reward, dict(getattr(obj, "sample_metrics", None) or {}))
    if isinstance(obj, tuple) and len(obj) == 2:
        return RewardResult(obj[0], dict(obj[1] or {}))
    if isinstance(obj, (int, float)) or hasattr(obj, "__float__"):
        return RewardResult(float(obj), {})
    raise TypeError(f"not a reward result: {type(obj).__name__}")


def results_to_columns(results: Iterable[Any]) -> tuple[list[Any], dict[str, list[Any]]]:
    """Rewards and sample-metric columns (union of keys, None where a result lacks one)."""
    rs = [as_reward_result(r) for r in results]
    names: dict[str, None] = {}
    for r in rs:
        names.update(dict.fromkeys(r.sample_metrics))
    metrics = {k: [r.sample_metrics.get(k) for r in rs] for k in names}
    return [r.total_reward for r in rs], metrics


# ---------------------------------------------------------------- tool metrics


def tool_metrics(calls: Mapping[str, int], *, errors: int = 0) -> dict[str, float | None]:
    """The `get_tool_metrics(state)` dict from per-tool call counts and an error count:
    `total_tool_calls`, `tool_success_count`, `tool_error_count`, `tool_success_rate` (None
    without calls), `unique_tools_used` and `<name>_calls` per tool."""
    total = sum(int(c) for c in calls.values())
    success = total - int(errors)
    out: dict[str, float | None] = {
        "total_tool_calls": total,
        "tool_success_count": success,
        "tool_error_count": int(errors),
        "tool_success_rate": success / total if total else None,
        "unique_tools_used": sum(1 for c in calls.values() if c),
    }
    out.update({f"{name}_calls": int(c) for name, c in calls.items()})
    return out


def merge_tool_metrics(result: Any, tools: Mapping[str, Any] | None) -> Any:
    """Merge a tool-metrics dict into a `RewardResult`'s (or a plain dict of) sample metrics.

    Only numbers (and None) are taken; a key the environment already set keeps its value.
    Returns a new object of the same kind."""
    numeric = {k: v for k, v in (tools or {}).items()
               if isinstance(k, str) and (v is None or _is_number(v))}
    if isinstance(result, Mapping) and "total_reward" not in result:
        return {**numeric, **result}
    r = as_reward_result(result)
    return RewardResult(r.total_reward, {**numeric, **r.sample_metrics})


def _is_number(v: Any) -> bool:
    if isinstance(v, (str, bytes)):
        return False
    try:
        float(v)
    except (TypeError, ValueError):
        return False
    return True


# ---------------------------------------------------------------- recorder

_COLUMNS = ("advantage", "prompt_tokens", "completion_tokens", "stop_reason",
            "off_policy_steps", "discard_reason")


class RewardRecorder:
    """Captures reward results with each sample's identity and hands them to a client.

    `env` and `step` are defaults for records that do not name their own (`set_step` moves
    the step). `context(*args, **kwargs)` maps the wrapped function's arguments to the record's
    identity: a `(sample_id, group_id)` or `(sample_id, group_id, step)` tuple or a mapping with
    `sample_id`, `group_id` and optionally `step`, `env`, `tool_metrics` and any of the optional
    columns. Without one, the first argument with a `group_id` attribute is used (its
    `sample_id` or `id`, and `step` when present), else `sample_id=` / `group_id=` keywords.
    Records are buffered until `flush()` (or `auto_flush` of them are pending), so `annotate`
    can add the columns known after the group is complete. Thread-safe.
    """

    def __init__(self, client: Client | None, env: str | None = None, *,
                 step: int | None = None, context: Callable[..., Any] | None = None,
                 auto_flush: int = 4096) -> None:
        self.client = client
        self.env = env
        self._step = step
        self._context = context
        self.auto_flush = auto_flush
        self._lock = threading.Lock()
        self._records: dict[str, dict[str, Any]] = {}
        self._warned: set[str] = set()
        self.stats: dict[str, int] = {"recorded": 0, "flushed": 0, "annotated": 0,
                                      "annotate_missed": 0, "errors": 0}

    def set_step(self, step: int) -> None:
        self._step = step

    @property
    def pending(self) -> int:
        return len(self._records)

    def record(self, result: Any, *, sample_id: Any, group_id: Any, step: int | None = None,
               env: str | None = None, tool_metrics: Mapping[str, Any] | None = None,
               **columns: Any) -> Any:
        """Buffer one result; returns `result` unchanged. Never raises."""
        try:
            r = as_reward_result(result)
            if tool_metrics:
                r = merge_tool_metrics(r, tool_metrics)
            step = self._step if step is None else step
            if step is None:
                raise ValueError("no step: pass step= or call set_step() first")
            unknown = set(columns) - set(_COLUMNS)
            if unknown:
                raise ValueError(f"unknown columns {sorted(unknown)}")
            rec = {"sample_id": sample_id, "group_id": group_id, "step": step,
                   "env": self.env if env is None else env, "reward": r.total_reward,
                   "metrics": r.sample_metrics,
                   "cols": {k: v for k, v in columns.items() if v is not None}}
            with self._lock:
                self._records[str(sample_id)] = rec
                self.stats["recorded"] += 1
                full = len(self._records) >= self.auto_flush
            if full:
                self.flush()
        except Exception as exc:  # noqa: BLE001 - recording must never break the caller
            self._problem("record", exc)
        return result

    def capture(self, fn: Callable[..., Any] | None = None, *,
                context: Callable[..., Any] | None = None) -> Any:
        """Decorator for `compute_reward` (sync or async): every result is recorded."""

        def deco(f: Callable[..., Any]) -> Callable[..., Any]:
            ctx = context or self._context
            if inspect.iscoroutinefunction(f):
                @functools.wraps(f)
                async def awrapper(*args: Any, **kwargs: Any) -> Any:
                    return self._record_call(await f(*args, **kwargs), ctx, args, kwargs)
                return awrapper

            @functools.wraps(f)
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                return self._record_call(f(*args, **kwargs), ctx, args, kwargs)
            return wrapper

        return deco(fn) if fn is not None else deco

    def _record_call(self, result: Any, ctx: Callable[..., Any] | None, args: tuple[Any, ...],
                     kwargs: dict[str, Any]) -> Any:
        try:
            info = _identity(ctx(*args, **kwargs) if ctx else _default_context(args, kwargs))
        except Exception as exc:  # noqa: BLE001
            self._problem("context", exc)
            return result
        return self.record(result, **info)

    def annotate(self, sample_ids: Iterable[Any], **columns: Any) -> int:
        """Set optional columns (`advantage=[...]`, `discard_reason="zero_advantage"`, ...)
        on pending records, values aligned with `sample_ids` or one scalar for all. Returns
        how many records matched."""
        try:
            ids = [str(s) for s in sample_ids]
            unknown = set(columns) - set(_COLUMNS)
            if unknown:
                raise ValueError(f"unknown columns {sorted(unknown)}")
            values = {k: _aligned(v, len(ids), k) for k, v in columns.items()}
            matched = 0
            with self._lock:
                for i, sid in enumerate(ids):
                    rec = self._records.get(sid)
                    if rec is None:
                        continue
                    matched += 1
                    for k, col in values.items():
                        rec["cols"][k] = col[i]
                self.stats["annotated"] += matched
                self.stats["annotate_missed"] += len(ids) - matched
            return matched
        except Exception as exc:  # noqa: BLE001
            self._problem("annotate", exc)
            return 0

    def flush(self) -> int:
        """Hand pending records to the client, one `log_samples` per (step, env); returns the
        number of samples handed over."""
        with self._lock:
            records, self._records = list(self._records.values()), {}
        groups: dict[tuple[Any, Any], list[dict[str, Any]]] = {}
        for rec in records:
            groups.setdefault((rec["step"], rec["env"]), []).append(rec)
        for (step, env), recs in groups.items():
            names: dict[str, None] = {}
            cols: dict[str, None] = {}
            for r in recs:
                names.update(dict.fromkeys(r["metrics"]))
                cols.update(dict.fromkeys(r["cols"]))
            if self.client is not None:
                self.client.log_samples(
                    step, sample_id=[r["sample_id"] for r in recs],
                    group_id=[r["group_id"] for r in recs], reward=[r["reward"] for r in recs],
                    env=env, metrics={k: [r["metrics"].get(k) for r in recs] for k in names},
                    **{c: [r["cols"].get(c) for r in recs] for c in cols})
        with self._lock:
            self.stats["flushed"] += len(records)
        return len(records)

    def _problem(self, where: str, exc: Exception) -> None:
        with self._lock:
            self.stats["errors"] += 1
            first = where not in self._warned
            self._warned.add(where)
        if first:
            log.warning("telescope: reward %s failed (counted in stats, logged once): %s",
                        where, exc)


def _aligned(value: Any, n: int, name: str) -> list[Any]:
    if isinstance(value, (str, int, float)) or value is None:
        return [value] * n
    out = list(value.tolist() if hasattr(value, "tolist") else value)
    if len(out) != n:
        raise ValueError(f"{name} has {len(out)} values for {n} sample ids")
    return out


def _identity(info: Any) -> dict[str, Any]:
    if isinstance(info, Mapping):
        return dict(info)
    if isinstance(info, tuple) and len(info) in (2, 3):
        keys = ("sample_id", "group_id", "step")
        return dict(zip(keys, info, strict=False))
    raise TypeError("context must return (sample_id, group_id[, step]) or a mapping")


def _default_context(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    for arg in (*args, *kwargs.values()):
        if hasattr(arg, "group_id") and not isinstance(arg, type):
            sid = getattr(arg, "sample_id", None)
            sid = getattr(arg, "id", None) if sid is None else sid
            out = {"sample_id": sid, "group_id": arg.group_id}
            if getattr(arg, "step", None) is not None:
                out["step"] = arg.step
            return out
    if "sample_id" in kwargs and "group_id" in kwargs:
        return {k: kwargs[k] for k in ("sample_id", "group_id", "step") if k in kwargs}
    raise TypeError("cannot find the sample's identity in the arguments; pass context=")


# ---------------------------------------------------------------- columnar samples (sender side)

FLOAT_COLUMNS = ("advantage", "prompt_tokens", "completion_tokens", "off_policy_steps")
STRING_COLUMNS = ("stop_reason", "discard_reason")
_ID_TYPES = frozenset({str, int})


class SampleError(ValueError):
    """A `log_samples` call that must be dropped whole (its required columns are unusable)."""


@dataclass
class SampleChunk:
    """One validated `log_samples` call: numeric columns as float64 arrays (NaN = null),
    ids and strings as lists. `step` and `env` are scalars when shared by every sample."""

    n: int
    step: int | np.ndarray
    sample_id: list[Any]
    group_id: list[Any]
    reward: np.ndarray
    env: str | None | list[str | None]
    time: float | np.ndarray
    floats: dict[str, np.ndarray]
    strings: dict[str, list[str | None]]
    metrics: dict[str, np.ndarray]
    nbytes: int

    def part(self, a: int, b: int) -> SampleChunk:
        def cut(v: Any) -> Any:
            return v[a:b] if isinstance(v, (list, np.ndarray)) else v

        return SampleChunk(
            b - a, cut(self.step), self.sample_id[a:b], self.group_id[a:b], self.reward[a:b],
            cut(self.env), cut(self.time), {k: v[a:b] for k, v in self.floats.items()},
            {k: v[a:b] for k, v in self.strings.items()},
            {k: v[a:b] for k, v in self.metrics.items()},
            self.nbytes * (b - a) // max(self.n, 1))

    def take(self, keep: np.ndarray) -> SampleChunk:
        """The samples where the boolean mask `keep` is true (rare path: restart dedupe)."""
        idx = np.flatnonzero(keep)
        out = self.part(0, self.n)
        pick = idx.tolist()

        def sel(v: Any) -> Any:
            if isinstance(v, np.ndarray):
                return v[idx]
            return [v[i] for i in pick] if isinstance(v, list) else v

        for name in ("step", "sample_id", "group_id", "reward", "env", "time"):
            setattr(out, name, sel(getattr(out, name)))
        for d in (out.floats, out.strings, out.metrics):
            for k in d:
                d[k] = sel(d[k])
        out.n, out.nbytes = len(pick), self.nbytes * len(pick) // max(self.n, 1)
        return out

    def identities(self) -> list[tuple[int, tuple[str, str, str]]]:
        """(step, (env, group id, sample id)) per sample: its identity across restarts."""
        n = self.n
        envs = self.env if isinstance(self.env, list) else [self.env] * n
        steps = self.step.tolist() if isinstance(self.step, np.ndarray) else [self.step] * n
        keys = zip([e or "" for e in envs], map(str, self.group_id), map(str, self.sample_id),
                   strict=True)
        return list(zip(steps, keys, strict=True))


def identity_record(fields: Mapping[str, Any]) -> tuple[int, int, bytes]:
    """What the outbox keeps of a samples message for restart de-duplication."""
    step = fields["step"]
    lo, hi = (step, step) if isinstance(step, int) else (min(step), max(step))
    data = msgpack.packb([step, fields.get("env"), fields["group_id"], fields["sample_id"]],
                         use_bin_type=True)
    return lo, hi, data


def make_chunk(step: Any, sample_id: Any, group_id: Any, reward: Any, env: Any,
               metrics: Any, columns: Mapping[str, Any], t: Any,
               problems: list[str]) -> SampleChunk:
    """Validate and convert one call's columns. A bad optional column or metric is left out
    (described in `problems`); a bad required column raises SampleError."""
    rew = _floats(reward, None, "reward")
    n = rew.size
    if n == 0:
        raise SampleError("reward: no samples")
    floats: dict[str, np.ndarray] = {}
    strings: dict[str, list[str | None]] = {}
    for name, values in columns.items():
        if values is None:
            continue
        try:
            if name in FLOAT_COLUMNS:
                floats[name] = _floats(values, n, name)
            elif name in STRING_COLUMNS:
                strings[name] = _strings(values, n, name)
            else:
                problems.append(f"unknown column {name!r} left out")
        except SampleError as exc:
            if name == "discard_reason":
                raise
            problems.append(f"{exc}; column left out")
    bad = set(strings.get("discard_reason", ())) - {None, *DISCARD_REASONS}
    if bad:
        raise SampleError(f"discard_reason: unknown {sorted(bad)}; expected None or one of "
                          f"{DISCARD_REASONS}")
    cols: dict[str, np.ndarray] = {}
    for name, values in (metrics or {}).items():
        try:
            check_key(name, f"metrics.{name}", kind="metric name")
            cols[name] = _floats(values, n, f"metrics.{name}")
        except (ProtocolError, SampleError) as exc:
            problems.append(f"{exc}; metric left out")
    sid, gid = _ids(sample_id, n, "sample_id"), _ids(group_id, n, "group_id")
    chunk = SampleChunk(n, _step(step, n), sid, gid, rew, _env(env, n),
                        t if isinstance(t, float) else _floats(t, n, "time"),
                        floats, strings, cols, 0)
    per_sample = 9 * (3 + len(floats) + len(cols)) + 6 * len(strings)
    chunk.nbytes = n * per_sample + _id_bytes(sid) + _id_bytes(gid)
    return chunk


def _floats(values: Any, n: int | None, name: str) -> np.ndarray:
    if hasattr(values, "detach"):  # a torch tensor, converted here off the caller's thread
        values = values.detach().cpu().numpy()
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


def _ids(values: Any, n: int, name: str) -> list[Any]:
    if isinstance(values, (str, int)) and name == "group_id":
        return [values] * n
    if hasattr(values, "detach"):
        values = values.detach().cpu().numpy()
    try:
        out = values.tolist() if isinstance(values, np.ndarray) else list(values)
    except TypeError:
        raise SampleError(f"{name}: must be a list") from None
    if len(out) != n:
        raise SampleError(f"{name}: {len(out)} values; reward has {n}")
    kinds = set(map(type, out))
    if not kinds <= _ID_TYPES:
        out = [_coerce_id(v, name) for v in out]
        kinds = set(map(type, out))
    longest = max(map(len, out)) if kinds == {str} else \
        max((len(v) for v in out if type(v) is str), default=0)
    if longest > MAX_ID_CHARS:
        raise SampleError(f"{name}: ids are limited to {MAX_ID_CHARS} characters")
    return out


def _coerce_id(v: Any, name: str) -> str | int:
    if type(v) in _ID_TYPES:
        return v  # type: ignore[no-any-return]
    if v is None or isinstance(v, (bool, float)):
        raise SampleError(f"{name}: {v!r} is not an id (strings or integers)")
    if isinstance(v, np.integer):
        return int(v)
    return str(v)


def _id_bytes(ids: list[Any]) -> int:
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


def _env(env: Any, n: int) -> str | None | list[str | None]:
    if env is None or isinstance(env, str):
        if env is not None and len(env) > MAX_KEY_CHARS:
            raise SampleError(f"env: names are limited to {MAX_KEY_CHARS} characters")
        return env
    out = _strings(env, n, "env")
    return out[0] if all(e == out[0] for e in out) else out


def _strings(values: Any, n: int, name: str) -> list[str | None]:
    if isinstance(values, str):
        return [values] * n
    out = list(values.tolist() if isinstance(values, np.ndarray) else values)
    if len(out) != n:
        raise SampleError(f"{name}: {len(out)} values; reward has {n}")
    if not set(map(type, out)) <= {str, type(None)}:
        raise SampleError(f"{name}: must hold strings or None")
    if any(len(v) > MAX_KEY_CHARS for v in out if v is not None):
        raise SampleError(f"{name}: values are limited to {MAX_KEY_CHARS} characters")
    return out


class SampleBatcher:
    """Accumulates chunks into columnar `samples` message bodies of at most `max_samples`
    samples and about `max_bytes` encoded bytes (a bigger chunk is cut)."""

    def __init__(self, max_samples: int, max_bytes: int) -> None:
        self.max_samples, self.max_bytes = max_samples, max_bytes
        self.chunks: list[SampleChunk] = []
        self.n = self.nbytes = 0
        self.oldest: float | None = None

    def add(self, chunk: SampleChunk, now: float) -> list[Batch]:
        """Add a chunk (cut to fill the open batch); returns the batches it completed."""
        sealed = []
        per = max(chunk.nbytes / max(chunk.n, 1), 1e-9)
        a = 0
        while a < chunk.n:
            room = min(self.max_samples - self.n, int((self.max_bytes - self.nbytes) / per))
            if room <= 0 and self.chunks:
                sealed.append(self.seal())
                continue
            b = min(chunk.n, a + max(room, 1))  # a lone sample above max_bytes goes alone
            part = chunk if a == 0 and b == chunk.n else chunk.part(a, b)
            self.chunks.append(part)
            self.n += part.n
            self.nbytes += part.nbytes
            self.oldest = now if self.oldest is None else self.oldest
            a = b
        if self.n >= self.max_samples:
            sealed.append(self.seal())
        return sealed

    def due(self, now: float, interval: float) -> bool:
        return self.oldest is not None and now - self.oldest >= interval

    def seal(self) -> Batch:
        chunks, self.chunks, self.n, self.nbytes, self.oldest = self.chunks, [], 0, 0, None
        return build_fields(chunks)


@dataclass
class Batch:
    """The fields of one `samples` message and its sample count."""

    fields: dict[str, Any]
    n: int


def build_fields(chunks: list[SampleChunk]) -> Batch:
    """Concatenate chunks into the fields of one `samples` message (absent columns of a
    chunk become nulls)."""
    n = sum(c.n for c in chunks)

    def floats(get: Callable[[SampleChunk], Any]) -> np.ndarray:
        return np.concatenate([np.full(c.n, np.nan) if get(c) is None
                               else np.broadcast_to(get(c), c.n) for c in chunks])

    def scalar_or_list(get: Callable[[SampleChunk], Any]) -> Any:
        values = [get(c) for c in chunks]
        if all(not isinstance(v, (list, np.ndarray)) for v in values) and \
                all(v == values[0] for v in values):
            return values[0]
        out: list[Any] = []
        for c, v in zip(chunks, values, strict=True):
            out.extend(v.tolist() if isinstance(v, np.ndarray) else
                       v if isinstance(v, list) else [v] * c.n)
        return out

    fields: dict[str, Any] = {
        "step": scalar_or_list(lambda c: c.step),
        "sample_id": [i for c in chunks for i in c.sample_id],
        "group_id": [i for c in chunks for i in c.group_id],
        "reward": np.concatenate([c.reward for c in chunks]),
    }
    env = scalar_or_list(lambda c: c.env)
    if env is not None:
        fields["env"] = env
    for name in _union(c.floats for c in chunks):
        fields[name] = floats(lambda c, k=name: c.floats.get(k))  # type: ignore[misc]
    for name in _union(c.strings for c in chunks):
        fields[name] = [s for c in chunks for s in c.strings.get(name, [None] * c.n)]
    fields["time"] = floats(lambda c: c.time)
    metric_names = _union(c.metrics for c in chunks)
    if metric_names:
        fields["metrics"] = {k: floats(lambda c, k=k: c.metrics.get(k))  # type: ignore[misc]
                             for k in metric_names}
    return Batch(fields, n)


def _union(dicts: Iterable[Mapping[str, Any]]) -> list[str]:
    names: dict[str, None] = {}
    for d in dicts:
        names.update(dict.fromkeys(d))
    return list(names)
