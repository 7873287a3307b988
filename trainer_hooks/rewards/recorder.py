"""`RewardRecorder`: captures reward results with each sample's identity for a client.

Wrap an environment's `compute_reward` with `@recorder.capture` or call
`recorder.record(result, sample_id=..., group_id=...)`; add the columns known only later
(advantage, tokens, stop reason, off-policy lag, discard reason, `prompt` and `completion`
text) with `recorder.annotate(...)`, then `recorder.flush()` hands the step's samples to the
client as columnar `log_samples` calls.
Recording never raises into the caller: problems are logged once and counted in `stats`.
"""

from __future__ import annotations

import functools
import inspect
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from trainer_hooks.rewards.result import as_reward_result, merge_tool_metrics
from trainer_hooks.warnonce import WarnOnce
from trainer_hooks.wire.protocol import OPTIONAL_COLUMNS

log = logging.getLogger("trainer_hooks.rewards")


class SampleLog(Protocol):
    """Where a recorder hands its samples: anything with `log_samples(step, sample_id=...,
    group_id=..., reward=..., env=..., metrics=..., **optional columns)`, such as a `Client`."""

    @property
    def log_samples(self) -> Callable[..., None]: ...


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

    def __init__(self, client: SampleLog | None, env: str | None = None, *,
                 step: int | None = None, context: Callable[..., Any] | None = None,
                 auto_flush: int = 4096) -> None:
        self.client = client
        self.env = env
        self._step = step
        self._context = context
        self.auto_flush = auto_flush
        self._lock = threading.Lock()
        self._records: dict[str, dict[str, Any]] = {}
        self._warn_once = WarnOnce(log)
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
            unknown = set(columns) - set(OPTIONAL_COLUMNS)
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
        """Set optional columns (`advantage=[...]`, `discard_reason="zero_advantage"`,
        `completion=[...]`, ...) on pending records, values aligned with `sample_ids` or one
        scalar for all. Returns how many records matched."""
        try:
            ids = [str(s) for s in sample_ids]
            unknown = set(columns) - set(OPTIONAL_COLUMNS)
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
        self._warn_once(where, "telescope: reward %s failed (counted in stats, logged once): "
                        "%s", where, exc)


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
