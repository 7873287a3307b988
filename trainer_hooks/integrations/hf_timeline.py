"""The Timeline of a `transformers` `Trainer` / TRL run: spans per rank, and TRL's profiling
timers as step metrics.

Two sources, both read-only (the training computes the same with or without them):

- **The trainer's own methods and callback events** (any `Trainer`): `training_loop_start` at
  `on_train_begin`; per optimizer step and rank `train_step` (from the step's first forward to
  `on_pre_optimizer_step`: its micro-batches and the gradient clipping), nested in it
  `train_step/forward` (each `compute_loss` call) and `train_step/backward` (each
  `accelerator.backward` call), then `optimizer_step` (`on_pre_optimizer_step` →
  `on_optimizer_step`). `compute_loss` and `accelerator.backward` are wrapped on the trainer
  *instance* when training starts (`install`), never on the class.
- **TRL's profiled blocks**: `trl.extras.profiling.profiling_context` (which
  `profiling_decorator` calls too) is replaced, in every module that imported it, by one that
  enters TRL's own context and also times the block. `TRL_BLOCKS` maps the blocks that are
  Timeline ops: generation calls → `generation`, `_calculate_rewards` → `compute_reward`
  (each reward function inside it → `compute_reward/<name>`), `sync_weights` (older TRL:
  `_move_model_to_vllm`) → `weight_broadcast`; the end of a `_prepare_inputs` that generated
  is the `save_batch` instant (the batch is ready). Every profiled block, mapped or not, adds
  its duration to `profiling/<name>` (`TrainerEvents.take_profiling`). A TRL without a block
  (or without `trl.extras.profiling` at all) just gives fewer events.

Steps: trainer spans of the optimizer step in progress carry `global_step + 1` (the step
`on_log` reports them at); `generation` and `weight_broadcast` the policy step that ran them
(`global_step`: the weights after that many steps); while evaluating, `global_step` and status
`eval`. Lanes: the trainer's spans carry `rank` (the process index); `generation` is source
`inference` on server 0, slot = rank (TRL generates in-process); `compute_reward` source
`reward`, same server and slot; `save_batch` source `orchestrator`, slot = rank.

Times are the CPU clock (`time.time()` at the start, `perf_counter` for the length), as TRL's
own timers: on a GPU a span ends when its work was queued, unless something in it waited for
the device (a `.item()`, a collective).
"""

from __future__ import annotations

import functools
import importlib
import inspect
import logging
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from trainer_hooks.warnonce import WarnOnce
from trainer_hooks.wire.events import EVENT_COLUMNS

log = logging.getLogger("trainer_hooks.integrations.hf")
_warn = WarnOnce(log)

# TRL's name of a profiled block (`profiling_context(trainer, name)`) → (event name, source).
TRL_BLOCKS: dict[str, tuple[str, str]] = {
    "transformers.generate": ("generation", "inference"),
    "transformers.generate_batch": ("generation", "inference"),  # continuous batching
    "vLLM.generate": ("generation", "inference"),
    "_calculate_rewards": ("compute_reward", "reward"),
    "sync_weights": ("weight_broadcast", "trainer"),
    "_move_model_to_vllm": ("weight_broadcast", "trainer"),  # TRL before sync_weights
}
REWARD_BLOCK = "_calculate_rewards"  # the blocks TRL opens inside it are reward functions
BATCH_BLOCK = "_prepare_inputs"  # its end, after a generation: the `save_batch` instant
PROFILING_PREFIX = "profiling/"
# The `events` columns a row holds, in its order (no sample or group ids: a TRL generation
# is a whole batch).
COLUMNS = tuple(c for c in EVENT_COLUMNS if c not in ("sample_id", "group_id"))

Row = tuple[str, float, float | None, str, int | None, int | None, int | None, int | None,
            str | None, int | None]


@dataclass
class _OpenStep:
    step: int
    begun: float  # on_step_begin
    first_forward: float | None = None
    optimizer_from: float | None = None  # on_pre_optimizer_step
    closed: bool = False  # train_step recorded


class TrainerEvents:
    """One process's events, kept until the callback takes them after each optimizer step,
    and the durations of TRL's profiled blocks since the last log. Safe from any thread
    (TRL runs async reward functions on its own event-loop thread)."""

    def __init__(self, rank: int = 0, *, spans: bool = True) -> None:
        self.rank = rank
        self.spans = spans  # False: no events, only the profiling durations
        self._lock = threading.Lock()
        self._rows: list[Row] = []
        self._durations: dict[str, list[float]] = {}  # name → [sum, count]
        self._step: _OpenStep | None = None
        self._in_rewards = 0  # `_calculate_rewards` blocks open (any thread)
        self._generated = False  # a generation since the last save_batch
        self._untokened: list[int] = []  # rows of generations whose tokens are not known yet

    # ------------------------------------------------------------ recording

    def add(self, name: str, start: float, end: float | None, source: str = "trainer", *,
            step: int | None = None, server: int | None = None, slot: int | None = None,
            status: str | None = None, tokens: int | None = None) -> int:
        """Record one span (an instant when `end` is None); its row number."""
        rank = self.rank if source == "trainer" else None
        with self._lock:
            if not self.spans:
                return -1
            self._rows.append((name, start, end, source, step, rank, server, slot, status,
                               tokens))
            return len(self._rows) - 1

    def take(self) -> dict[str, list[Any]]:
        """The events recorded since the last take, as `log_events` columns."""
        with self._lock:
            rows, self._rows, self._untokened = self._rows, [], []
        return {c: [r[i] for r in rows] for i, c in enumerate(COLUMNS)}

    def take_profiling(self) -> dict[str, float]:
        """`profiling/<name>`: the mean seconds per call of each TRL profiled block since the
        last take."""
        with self._lock:
            durations, self._durations = self._durations, {}
        return {PROFILING_PREFIX + name: total / count
                for name, (total, count) in durations.items() if count}

    # ------------------------------------------------------------ the optimizer step

    def loop_start(self) -> None:
        self.add("training_loop_start", time.time(), None)

    def step_begin(self, step: int) -> None:
        self._step = _OpenStep(step, time.time())

    def forward(self, start: float, end: float, step: int) -> None:
        if self._step is not None and self._step.first_forward is None:
            self._step.first_forward = start
        self.add("train_step/forward", start, end, step=step)

    def backward(self, start: float, end: float, step: int) -> None:
        self.add("train_step/backward", start, end, step=step)

    def pre_optimizer(self) -> None:
        now = time.time()
        self._close_train_step(now)
        if self._step is not None:
            self._step.optimizer_from = now

    def optimizer_done(self) -> None:
        open_step = self._step
        if open_step is not None and open_step.optimizer_from is not None:
            self.add("optimizer_step", open_step.optimizer_from, time.time(),
                     step=open_step.step)
            open_step.optimizer_from = None

    def step_end(self) -> None:
        """The optimizer step is over (`on_step_end`): a `train_step` not closed by
        `on_pre_optimizer_step` (a transformers without it) ends here."""
        self._close_train_step(time.time())
        self._step = None

    def _close_train_step(self, end: float) -> None:
        open_step = self._step
        if open_step is None or open_step.closed:
            return
        open_step.closed = True
        start = open_step.first_forward if open_step.first_forward is not None else open_step.begun
        self.add("train_step", start, max(end, start), step=open_step.step)

    # ------------------------------------------------------------ TRL's profiled blocks

    @contextmanager
    def block(self, name: str, trainer: Any) -> Iterator[None]:
        """Time one TRL profiled block named `name` of `trainer` (see the module docstring)."""
        event = self._event_of(name, trainer)
        if name == REWARD_BLOCK:
            with self._lock:
                self._in_rewards += 1
        start, t0 = time.time(), time.perf_counter()
        try:
            yield
        finally:
            seconds = time.perf_counter() - t0
            if name == REWARD_BLOCK:
                with self._lock:
                    self._in_rewards -= 1
            self._finish(name, event, trainer, start, seconds)

    def _event_of(self, name: str, trainer: Any) -> tuple[str, str] | None:
        if name in TRL_BLOCKS:
            return TRL_BLOCKS[name]
        names = getattr(trainer, "reward_func_names", None)
        is_reward = name in names if isinstance(names, list) else self._in_rewards > 0
        return (f"compute_reward/{name}", "reward") if is_reward else None

    def _finish(self, name: str, event: tuple[str, str] | None, trainer: Any, start: float,
                seconds: float) -> None:
        with self._lock:
            acc = self._durations.setdefault(name, [0.0, 0])
            acc[0] += seconds
            acc[1] += 1
        training = _training(trainer)
        global_step = _global_step(trainer)
        if name == BATCH_BLOCK and training and self._generated:
            self._generated = False
            self.add("save_batch", start + seconds, None, "orchestrator", step=global_step + 1,
                     server=0, slot=self.rank)
        if event is None:
            return
        op, source = event
        policy = op in ("generation", "weight_broadcast") or not training
        step = global_step if policy else global_step + 1
        status = None if training else "eval"
        lane = {} if source == "trainer" else {"server": 0, "slot": self.rank}
        row = self.add(op, start, start + seconds, source, step=step, status=status, **lane)
        if op == "generation":
            self._generated = self._generated or training
            if row >= 0:
                with self._lock:
                    self._untokened.append(row)

    def generated_tokens(self, tokens: int) -> None:
        """The completions of the latest generations hold `tokens` tokens (read from what TRL
        hands its reward computation): their share goes to each generation not yet told."""
        with self._lock:
            rows, self._untokened = self._untokened, []
            for i, row in enumerate(rows):
                share = tokens // len(rows) + (1 if i < tokens % len(rows) else 0)
                self._rows[row] = (*self._rows[row][:9], share)


# ---------------------------------------------------------------- hooking a trainer

_recorders: weakref.WeakKeyDictionary[Any, TrainerEvents] = weakref.WeakKeyDictionary()
_MARK = "_telescope_timeline"


def install(trainer: Any, events: TrainerEvents) -> None:
    """Hook `trainer` (at the start of its training) so its work reaches `events`: TRL's
    profiling, `compute_loss`, `accelerator.backward` and `_calculate_rewards` (the generated
    tokens). Idempotent; what the trainer or TRL lacks is skipped."""
    try:
        _recorders[trainer] = events
    except TypeError:  # a trainer that cannot be weakly referenced: TRL's blocks not seen
        pass
    _patch_profiling(type(trainer))
    _wrap(trainer, "compute_loss", _timed_forward)
    accelerator = getattr(trainer, "accelerator", None)
    if accelerator is not None:
        _wrap(accelerator, "backward", _timed_backward, trainer)
    if callable(getattr(trainer, REWARD_BLOCK, None)):
        _wrap(trainer, REWARD_BLOCK, _counting_tokens)


def events_of(trainer: Any) -> TrainerEvents | None:
    try:
        return _recorders.get(trainer)
    except TypeError:
        return None


Wrapper = Callable[[Any, Callable[..., Any], tuple[Any, ...], dict[str, Any]], Any]


def _wrap(owner: Any, attr: str, wrapper: Wrapper, trainer: Any = None) -> None:
    original = getattr(owner, attr, None)
    if original is None or getattr(original, _MARK, False):
        return
    trainer = owner if trainer is None else trainer
    ref = weakref.ref(trainer)

    @functools.wraps(original)
    def hooked(*args: Any, **kwargs: Any) -> Any:
        return wrapper(ref(), original, args, kwargs)

    setattr(hooked, _MARK, True)
    try:
        setattr(owner, attr, hooked)
    except (AttributeError, TypeError):  # a slotted or frozen object: not timed
        pass


@contextmanager
def _span_times() -> Iterator[list[float]]:
    times = [time.time()]
    t0 = time.perf_counter()
    yield times
    times.append(times[0] + time.perf_counter() - t0)


def _timed_forward(trainer: Any, original: Callable[..., Any], args: tuple[Any, ...],
                   kwargs: dict[str, Any]) -> Any:
    events = events_of(trainer)
    if events is None or not _training(trainer):  # evaluation's forward passes: not a step
        return original(*args, **kwargs)
    with _span_times() as times:
        out = original(*args, **kwargs)
    _safely(events.forward, times[0], times[1], _global_step(trainer) + 1)
    return out


def _timed_backward(trainer: Any, original: Callable[..., Any], args: tuple[Any, ...],
                    kwargs: dict[str, Any]) -> Any:
    events = events_of(trainer)
    if events is None:
        return original(*args, **kwargs)
    with _span_times() as times:
        out = original(*args, **kwargs)
    _safely(events.backward, times[0], times[1], _global_step(trainer) + 1)
    return out


def _counting_tokens(trainer: Any, original: Callable[..., Any], args: tuple[Any, ...],
                     kwargs: dict[str, Any]) -> Any:
    events = events_of(trainer)
    if events is not None:
        _safely(_tell_tokens, events, original, args, kwargs)
    return original(*args, **kwargs)


def _tell_tokens(events: TrainerEvents, original: Callable[..., Any], args: tuple[Any, ...],
                 kwargs: dict[str, Any]) -> None:
    bound = inspect.signature(original).bind_partial(*args, **kwargs)
    ids = bound.arguments.get("completion_ids_list")
    if ids is not None:
        events.generated_tokens(sum(len(c) for c in ids))


def _safely(fn: Callable[..., Any], *args: Any) -> None:
    try:
        fn(*args)
    except Exception as exc:  # noqa: BLE001 - the Timeline never breaks training
        _warn(("timeline", getattr(fn, "__name__", "")), "telescope: timeline: %s failed "
              "(%s: %s); left out", getattr(fn, "__name__", fn), type(exc).__name__, exc)


def _training(trainer: Any) -> bool:
    return bool(getattr(getattr(trainer, "model", None), "training", True))


def _global_step(trainer: Any) -> int:
    return int(getattr(getattr(trainer, "state", None), "global_step", 0) or 0)


# ---------------------------------------------------------------- TRL's profiling_context


def _patch_profiling(trainer_class: type) -> None:
    """Put `_profiled` in place of TRL's `profiling_context` in `trl.extras.profiling` (which
    `profiling_decorator` calls) and in every module that imported it by name: TRL's trainers
    and the modules of `trainer_class`'s bases (a user's subclass)."""
    module = sys.modules.get("trl.extras.profiling")
    if module is None:
        try:  # (only when TRL is there)
            module = importlib.import_module("trl.extras.profiling")
        except ImportError:
            return
    original = vars(module).get("profiling_context")
    if original is None:
        return
    original = getattr(original, "_telescope_original", original)
    mine = _profiled_for(original)
    names = {c.__module__ for c in trainer_class.__mro__}
    for name, mod in list(sys.modules.items()):
        if mod is None or not (name == "trl" or name.startswith("trl.") or name in names):
            continue
        if vars(mod).get("profiling_context") is original:
            setattr(mod, "profiling_context", mine)  # noqa: B010 - a module global


_patched: dict[int, Callable[..., Any]] = {}


def _profiled_for(original: Callable[..., Any]) -> Callable[..., Any]:
    """The one replacement of `original` (the same object every time, so patching twice
    changes nothing)."""
    if id(original) in _patched:
        return _patched[id(original)]

    @functools.wraps(original)
    def profiling_context(trainer: Any, name: str) -> Any:
        inner = original(trainer, name)
        events = events_of(trainer)
        return inner if events is None else _Timed(inner, events, trainer, name)

    profiling_context._telescope_original = original  # type: ignore[attr-defined]
    _patched[id(original)] = profiling_context
    return profiling_context


class _Timed:
    """TRL's profiling context (entered as it is) around our timing of the same block; may be
    entered more than once (TRL hands one to vLLM generation as `profiler=`)."""

    def __init__(self, inner: Any, events: TrainerEvents, trainer: Any, name: str) -> None:
        self._inner, self._events, self._trainer, self._name = inner, events, trainer, name
        self._open: list[Any] = []

    def __enter__(self) -> Any:
        entered = self._inner.__enter__()
        try:
            timing = self._events.block(self._name, self._trainer)
            timing.__enter__()
            self._open.append(timing)
        except Exception as exc:  # noqa: BLE001 - the Timeline never breaks training
            self._open.append(None)
            _warn(("timeline", "enter"), "telescope: timeline: %s; left out", exc)
        return entered

    def __exit__(self, *exc: Any) -> Any:
        timing = self._open.pop() if self._open else None
        if timing is not None:
            try:
                timing.__exit__(None, None, None)
            except Exception as err:  # noqa: BLE001
                _warn(("timeline", "exit"), "telescope: timeline: %s; left out", err)
        return self._inner.__exit__(*exc)
