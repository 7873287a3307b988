"""`telescope_reward`: capture every completion a TRL reward function scores, as samples.

TRL calls each reward function once per generation batch with the batch's `prompts`,
`completions`, `completion_ids`, its dataset columns and `trainer_state`; it sums the
functions' (weighted) outputs into the completion's reward and normalizes it within each group
of `num_generations` completions of one prompt. The wrapper records, per completion: the
reward (Σ weight × value over the wrapped functions of the batch; null when all returned None,
as TRL leaves such a completion unscored), its group (prompt) id, the step it is trained at,
its completion length and stop reason, its advantage as the trainer computed it for the loss
(`hf.watch_advantages`: TRL's `_generate_and_score_completions` returns them; TRL zeroes an
unscorable completion's), each function's own unweighted value (as a sample
metric when a batch has several, the figure TRL logs as `rewards/<fn>/mean`), the per-sample
numbers the function passes to TRL's `log_extra`, the `sample_metrics` of `RewardResult`s it
returns (TRL gets their `total_reward`), and the prompt and completion as text (`as_text`;
`TelescopeCallback(text=False)`: none). The function's output reaches TRL unchanged otherwise,
so the loss is the same with or without the wrapper.

Capture happens only while a `TelescopeCallback` trains (evaluation batches are not recorded)
and never raises into TRL: a problem is logged once and counted in `SampleCapture.stats`.
Pure: no transformers import; the callback (`hf.py`) hands in the layout and takes the chunks.
"""

from __future__ import annotations

import functools
import inspect
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from trainer_hooks.rewards.result import as_reward_result
from trainer_hooks.warnonce import WarnOnce

if TYPE_CHECKING:
    from trainer_hooks.integrations.hf import TelescopeCallback

log = logging.getLogger("trainer_hooks.integrations.hf")

_active: list[TelescopeCallback] = []  # the callback that trains in this process (last one)
_wrapped: list[str] = []  # the reward functions wrapped in this process (the same on every rank)


def activate(callback: TelescopeCallback) -> None:
    """Make `callback` the one `telescope_reward` records into."""
    _active[:] = [callback]


def active_callback() -> TelescopeCallback | None:
    return _active[0] if _active else None


def any_wrapped() -> bool:
    """Whether this process wrapped a reward function (every rank runs the same script, so
    all ranks agree: the callback skips its per-step gather when none did)."""
    return bool(_wrapped)


@dataclass
class Layout:
    """Where this process's completions sit in TRL's global generation batch: completion i
    of a batch of n on process p is number p·n + i, and TRL groups consecutive runs of
    `num_generations` of them (one prompt each)."""

    process_index: int = 0
    num_generations: int | None = None
    stop_token_ids: frozenset[int] = frozenset()  # eos and pad: an ending that is not "length"


@dataclass
class _Batch:
    """The completions of one generation batch, as the wrapped functions score them."""

    completions: Any  # TRL's list object: one per batch, shared by every reward function
    step: int
    call: int
    size: int  # completions in the batch
    group_ids: list[str]
    sample_ids: list[str]
    env: Any
    lengths: list[int] | None
    stop_reason: list[str] | None
    prompt: list[str | None] | None = None
    completion: list[str | None] | None = None
    rewards: dict[str, list[float | None]] = field(default_factory=dict)  # raw, per function
    weights: dict[str, float] = field(default_factory=dict)  # each function's, for the total
    metrics: dict[str, list[Any]] = field(default_factory=dict)
    advantage: list[float] | None = None  # as the trainer computed them for the loss


class SampleCapture:
    """This process's captured completions, as columnar chunks ready for `log_samples`.
    Thread-safe: TRL runs async reward functions on a loop thread of their own."""

    def __init__(self, text: bool = True) -> None:
        self.text = text  # keep each completion's prompt and completion text
        self.layout = Layout()
        self._lock = threading.Lock()
        self._open: _Batch | None = None
        self._chunks: list[dict[str, Any]] = []
        self._calls: tuple[int, int] = (-1, 0)  # (step, batches begun at that step)
        self._warn_once = WarnOnce(log)
        self.stats = {"batches": 0, "samples": 0, "errors": 0}

    # ------------------------------------------------------------ called by the wrapper

    def begin(self, kwargs: Mapping[str, Any], step: int, env: Any,
              env_column: str | None) -> _Batch | None:
        """The batch `kwargs` belong to: the open one when these are its completions (another
        reward function of the same batch), else a new one (the previous is complete)."""
        try:
            completions = kwargs["completions"]
            with self._lock:
                if self._open is not None and self._open.completions is completions:
                    return self._open
                self._close_open()
                self._open = self._new_batch(kwargs, completions, step, env, env_column)
                return self._open
        except Exception as exc:  # noqa: BLE001 - capture never breaks training
            self.problem("begin", exc)
            return None

    def add_rewards(self, batch: _Batch, name: str, weight: float, output: Any) -> Any:
        """Record one function's output for `batch`; returns what TRL should get."""
        try:
            values, metrics, converted = _rewards_of(output, batch.size)
            with self._lock:
                key = name if name not in batch.rewards else f"{name}_{len(batch.rewards)}"
                # Raw, as TRL logs `rewards/<fn>/mean` and a declared range reads it: the
                # weight belongs in the total only (`_close_open`).
                batch.rewards[key] = values
                batch.weights[key] = weight
                for metric, column in metrics.items():
                    batch.metrics.setdefault(metric, column)
            return values if converted else output
        except Exception as exc:  # noqa: BLE001
            self.problem("record", exc)
            return output

    def add_extra(self, batch: _Batch, column: str, values: Any) -> None:
        """A `log_extra(column, values)` call: numeric per-sample columns become metrics."""
        try:
            vals = list(values)
            if len(vals) == batch.size and all(_number_or_none(v) for v in vals):
                with self._lock:
                    batch.metrics[str(column)] = [None if v is None else float(v) for v in vals]
        except Exception as exc:  # noqa: BLE001
            self.problem("log_extra", exc)

    def open_batch(self) -> _Batch | None:
        with self._lock:
            return self._open

    def add_advantages(self, before: _Batch | None, output: Any) -> None:
        """The trainer's scoring step returned `output` (TRL: `{"advantages": tensor, ...}`,
        this process's completions in order): give its advantages to the batch the reward
        functions scored during it (none when they scored nothing new: `before` is still
        open, or evaluation)."""
        try:
            values = output.get("advantages") if isinstance(output, Mapping) else None
            if values is None:
                return
            column = values.tolist() if hasattr(values, "tolist") else list(values)
            with self._lock:
                batch = self._open
                if batch is None or batch is before or batch.advantage is not None:
                    return
                if len(column) != batch.size or not all(_number_or_none(v) for v in column):
                    raise ValueError(f"{len(column)} advantages of shape other than one "
                                     f"number per completion ({batch.size})")
                batch.advantage = [float(v) for v in column]
        except Exception as exc:  # noqa: BLE001 - capture never breaks training
            self.problem("advantages", exc)

    # ------------------------------------------------------------ called by the callback

    def take(self) -> list[dict[str, Any]]:
        """Every completed batch since the last call, as `log_samples` keyword chunks."""
        with self._lock:
            self._close_open()
            chunks, self._chunks = self._chunks, []
        return chunks

    def problem(self, where: str, exc: Exception) -> None:
        with self._lock:
            self.stats["errors"] += 1
        self._warn_once(where, "telescope: reward capture (%s) failed; counted, logged once: "
                        "%s: %s", where, type(exc).__name__, exc)

    # ------------------------------------------------------------ internals (lock held)

    def _new_batch(self, kwargs: Mapping[str, Any], completions: Any, step: int, env: Any,
                   env_column: str | None) -> _Batch:
        n = len(completions)
        last_step, calls = self._calls
        call = calls if step == last_step else 0
        self._calls = (step, call + 1)
        base = self.layout.process_index * n
        prefix = f"s{step}-c{call}"
        sample_ids = [f"{prefix}-{base + i}" for i in range(n)]
        group_ids = [f"{prefix}-g{g}" for g in self._groups(kwargs.get("prompts"), base, n)]
        if env_column is not None and env_column in kwargs:
            env = [None if e is None else str(e) for e in kwargs[env_column]]
        lengths, stops = self._lengths(kwargs.get("completion_ids"), n)
        batch = _Batch(completions, step, call, n, group_ids, sample_ids, env, lengths, stops)
        if self.text:
            prompts = kwargs.get("prompts")
            batch.completion = [as_text(c) for c in completions]
            if prompts is not None and len(prompts) == n:
                batch.prompt = [as_text(p) for p in prompts]
        return batch

    def _groups(self, prompts: Sequence[Any] | None, base: int, n: int) -> list[int | str]:
        g = self.layout.num_generations
        if g:
            return [(base + i) // g for i in range(n)]
        # No num_generations (not a GRPO-style trainer): completions of one prompt text.
        first: dict[str, int] = {}
        keys = [repr(p) for p in prompts] if prompts is not None else [str(i) for i in range(n)]
        return [f"{self.layout.process_index}.{first.setdefault(k, i)}"
                for i, k in enumerate(keys)]

    def _lengths(self, ids: Any, n: int) -> tuple[list[int] | None, list[str] | None]:
        if ids is None or len(ids) != n:
            return None, None
        lengths = [len(x) for x in ids]
        stop = self.layout.stop_token_ids
        if not stop:
            return lengths, None
        return lengths, ["stop" if len(x) and int(x[-1]) in stop else "length" for x in ids]

    def _close_open(self) -> None:
        batch, self._open = self._open, None
        if batch is None or not batch.rewards:
            return
        weighted = [[None if v is None else batch.weights[k] * v for v in col]
                    for k, col in batch.rewards.items()]
        reward = [_sum_known(col[i] for col in weighted) for i in range(batch.size)]
        metrics = dict(batch.metrics)
        if len(batch.rewards) > 1:  # each function's own (unweighted) value, beside the sum
            for name, col in batch.rewards.items():
                metrics.setdefault(name, col)
        chunk: dict[str, Any] = {"step": batch.step, "sample_id": batch.sample_ids,
                                 "group_id": batch.group_ids, "reward": reward,
                                 "env": batch.env, "metrics": metrics or None}
        if batch.advantage is not None:
            chunk["advantage"] = batch.advantage
        if batch.lengths is not None:
            chunk["completion_tokens"] = batch.lengths
        if batch.stop_reason is not None:
            chunk["stop_reason"] = batch.stop_reason
        if batch.prompt is not None:
            chunk["prompt"] = batch.prompt
        if batch.completion is not None:
            chunk["completion"] = batch.completion
        self._chunks.append(chunk)
        self.stats["batches"] += 1
        self.stats["samples"] += batch.size


def as_text(x: Any) -> str | None:
    """A prompt or completion as text: a string as it is; a conversation (TRL's
    conversational format, a list of {"role", "content"}) one `role: content` line per
    message, the text parts of multimodal content joined."""
    if x is None or isinstance(x, str):
        return x
    if isinstance(x, list) and all(isinstance(m, Mapping) for m in x):
        return "\n".join(f"{m.get('role', '')}: {_content_text(m.get('content'))}" for m in x)
    return str(x)


def _content_text(content: Any) -> str:
    if isinstance(content, list):
        return " ".join(str(part.get("text", "")) for part in content
                        if isinstance(part, Mapping) and part.get("type") == "text")
    return "" if content is None else str(content)


def _sum_known(values: Any) -> float | None:
    known = [v for v in values if v is not None]
    return float(sum(known)) if known else None


def _number_or_none(v: Any) -> bool:
    return v is None or (isinstance(v, (int, float)) and not isinstance(v, bool))


def _rewards_of(output: Any, n: int) -> tuple[list[float | None], dict[str, list[Any]], bool]:
    """(reward per completion, sample-metric columns, whether TRL needs `values` instead of
    `output`): floats and None pass as they are; `RewardResult`s (or mappings with
    `total_reward`, or `(reward, metrics)` pairs) give their reward to TRL and their metrics
    to Telescope."""
    items = output.tolist() if hasattr(output, "tolist") else list(output)
    if len(items) != n:
        raise ValueError(f"the reward function returned {len(items)} values for {n} "
                         "completions")
    values: list[float | None] = []
    metric_rows: list[Mapping[str, Any]] = []
    converted = False
    for item in items:
        if item is None:
            values.append(None)
            metric_rows.append({})
        elif isinstance(item, (int, float)) and not isinstance(item, bool):
            values.append(float(item))
            metric_rows.append({})
        else:
            result = as_reward_result(item)
            converted = True
            values.append(None if result.total_reward is None else float(result.total_reward))
            metric_rows.append(result.sample_metrics)
    names: dict[str, None] = {}
    for row in metric_rows:
        names.update(dict.fromkeys(row))
    metrics = {k: [row.get(k) for row in metric_rows] for k in names}
    return values, metrics, converted


def _training_step(callback: TelescopeCallback, kwargs: Mapping[str, Any]) -> int | None:
    """The optimizer step these completions are trained at (TRL scores a batch before the
    step that uses it: `global_step + 1`), or None when not training (evaluation)."""
    if not callback.is_training():
        return None
    state = kwargs.get("trainer_state") or callback.state
    return None if state is None else int(state.global_step) + 1


def telescope_reward(fn: Callable[..., Any], env: str | None = None, *,
                     env_column: str | None = None, weight: float = 1.0,
                     name: str | None = None) -> Callable[..., Any]:
    """Wrap a TRL reward function (sync or async) so every completion it scores reaches
    Telescope as a sample of the running `TelescopeCallback`'s run.

    `env` names the environment of every completion, or `env_column` a dataset column that
    holds each one's. Wrap every reward function of the trainer: a completion's reward is the
    sum over the wrapped functions of `weight` × its value (pass your `reward_weights` entry
    as `weight`), each function's raw value (the weight applies to the total only) becoming
    a sample metric named `name` (default: the function's name) when there are several.
    Without a training `TelescopeCallback` the function runs as it is."""
    label = name or str(getattr(fn, "__name__", type(fn).__name__))
    _wrapped.append(label)

    def _begin(kwargs: dict[str, Any]) -> tuple[Any, Any]:
        callback = active_callback()
        if callback is None or "completions" not in kwargs:
            return None, None
        capture = callback.capture
        try:
            step = _training_step(callback, kwargs)
        except Exception as exc:  # noqa: BLE001 - capture never breaks training
            capture.problem("step", exc)
            return None, None
        if step is None:
            return None, None
        batch = capture.begin(kwargs, step, env, env_column)
        if batch is not None and callable(kwargs.get("log_extra")):
            kwargs["log_extra"] = _tee_log_extra(kwargs["log_extra"], capture, batch)
        return capture, batch

    if inspect.iscoroutinefunction(fn):
        @functools.wraps(fn)
        async def areward(*args: Any, **kwargs: Any) -> Any:
            capture, batch = _begin(kwargs)
            out = await fn(*args, **kwargs)
            return out if batch is None else capture.add_rewards(batch, label, weight, out)
        return areward

    @functools.wraps(fn)
    def reward(*args: Any, **kwargs: Any) -> Any:
        capture, batch = _begin(kwargs)
        out = fn(*args, **kwargs)
        return out if batch is None else capture.add_rewards(batch, label, weight, out)
    return reward


def _tee_log_extra(log_extra: Callable[[str, list[Any]], Any], capture: SampleCapture,
                   batch: _Batch) -> Callable[[str, list[Any]], Any]:
    def tee(column: str, values: list[Any]) -> Any:
        out = log_extra(column, values)
        capture.add_extra(batch, column, values)
        return out
    return tee
