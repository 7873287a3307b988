"""One `log_samples` call, validated and converted to columns on the sender thread.

`make_chunk` turns whatever the caller passed (lists, numpy arrays, tensors, scalars shared by
every sample) into a `SampleChunk`: numeric columns as float64 arrays (NaN = null), ids and
strings as lists. A bad optional column or metric is left out and described; a bad required
column (reward, ids, step, env, discard reason) raises `SampleError` and the call is dropped.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from trainer_hooks.protocol import (
    DISCARD_REASONS,
    MAX_ID_CHARS,
    MAX_KEY_CHARS,
    ProtocolError,
    check_key,
)

FLOAT_COLUMNS = ("advantage", "prompt_tokens", "completion_tokens", "off_policy_steps")
STRING_COLUMNS = ("stop_reason", "discard_reason")
# the optional per-sample columns, in `Client.log_samples` argument order
OPTIONAL_COLUMNS = ("advantage", "prompt_tokens", "completion_tokens", "stop_reason",
                    "off_policy_steps", "discard_reason")
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


def make_chunk(step: Any, sample_id: Any, group_id: Any, reward: Any, env: Any,
               metrics: Any, columns: Mapping[str, Any], t: Any,
               problems: list[str]) -> SampleChunk:
    """Validate and convert one call's columns. A bad optional column or metric is left out
    (described in `problems`); a bad required column raises SampleError."""
    rew = _floats(reward, None, "reward")
    n = rew.size
    if n == 0:
        raise SampleError("reward: no samples")
    floats, strings = _optional_columns(columns, n, problems)
    cols = _metric_columns(metrics, n, problems)
    sid, gid = _ids(sample_id, n, "sample_id"), _ids(group_id, n, "group_id")
    chunk = SampleChunk(n, _step(step, n), sid, gid, rew, _env(env, n),
                        t if isinstance(t, float) else _floats(t, n, "time"),
                        floats, strings, cols, 0)
    per_sample = 9 * (3 + len(floats) + len(cols)) + 6 * len(strings)
    chunk.nbytes = n * per_sample + _id_bytes(sid) + _id_bytes(gid)
    return chunk


def _optional_columns(columns: Mapping[str, Any], n: int, problems: list[str]
                      ) -> tuple[dict[str, np.ndarray], dict[str, list[str | None]]]:
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
    return floats, strings


def _metric_columns(metrics: Any, n: int, problems: list[str]) -> dict[str, np.ndarray]:
    cols: dict[str, np.ndarray] = {}
    for name, values in (metrics or {}).items():
        try:
            check_key(name, f"metrics.{name}", kind="metric name")
            cols[name] = _floats(values, n, f"metrics.{name}")
        except (ProtocolError, SampleError) as exc:
            problems.append(f"{exc}; metric left out")
    return cols
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
