"""`Timeline`: per-step region timings under Telescope's timeline keys.

    timeline = Timeline()                        # Timeline.cuda() on GPU
    with timeline.region("waiting_for_data"):
        batch = next(loader)
    for micro in split(batch):
        with timeline.microbatch():
            with timeline.region("forward"):
                ...
    metrics = timeline.step_metrics()            # ends the step, starts the next

**Events.** Given a client (`Timeline(client=client)`: rank 0's `connect(...)`, every other
rank its own `connect(..., join=True)`), `step_metrics(step=i)` also logs the step's regions as
`events` (PROTOCOL `events`): one span per region occurrence, named by its op, `source
trainer`, `step` i (default: one more than the previous step, from `step=` at construction),
`rank` as given or torch.distributed's when initialised. The server derives the same
`timing_*` series from them over every rank (DESIGN "Where the time goes"). `waiting_for_data`
is not sent: the server measures the wait as the gap between steps, and a span would count it
as work. Times are the clock's readings moved to unix time (the offset taken at
construction); a CUDA region starts when the CPU enqueued it and lasts its GPU time.

Keys (seconds): `timing_<op>_total` (the op's total in the step), `timing_<op>_microbatch_mean`
(mean per microbatch, over the microbatches in which the op ran), `timing_step_total` (wall time
from the step's start to `step_metrics()`), `timing_step_active` (step total minus waiting for
data) and `timing_waiting_for_data`. With CUDA events a region records two events on the current
stream and nothing waits until `step_metrics()`, which synchronises once for the whole step;
`waiting_for_data` always uses the CPU clock, since the GPU is idle while the loader blocks.
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

TIMELINE_OPS = (
    "forward",
    "backward",
    "loss_computation",
    "compute_kl",
    "compute_entropy",
    "data_to_device",
    "prepare_tensors",
    "weight_sync_trainer",
    "weight_sync_inference",
    "waiting_for_data",
)
WAITING = "waiting_for_data"
_OP_NAME = re.compile(r"[a-z][a-z0-9_]*\Z")


class EventBackend(Protocol):
    """Device timing: `record()` returns an event recorded on the current stream;
    `synchronize()` waits for all of them; `elapsed(start, end)` is seconds between two."""

    def record(self) -> Any: ...

    def synchronize(self) -> None: ...

    def elapsed(self, start: Any, end: Any) -> float: ...


class CudaEvents:
    """`EventBackend` over torch.cuda events (the path for GPU training)."""

    def __init__(self) -> None:
        import torch

        self._torch = torch

    def record(self) -> Any:
        # torch.cuda.Event's constructor has no annotations (torch's typing, not ours)
        event = self._torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        event.record()
        return event

    def synchronize(self) -> None:
        self._torch.cuda.synchronize()

    def elapsed(self, start: Any, end: Any) -> float:
        return float(start.elapsed_time(end)) / 1000.0  # CUDA reports milliseconds


class EventSink(Protocol):
    """Where a timeline logs its regions as events: `Client.log_events`."""

    def log_events(self, *, name: Any, start: Any, end: Any = None, source: Any = None,
                   step: Any = None, rank: Any = None) -> None: ...


@dataclass
class _Span:
    op: str
    microbatch: int | None
    start: Any
    end: Any = None
    device: bool = False  # start/end are backend events rather than clock readings
    cpu: float = 0.0  # the clock when it started (a device span's place in time)


@dataclass
class _Step:
    started: float
    spans: list[_Span] = field(default_factory=list)
    microbatches: int = 0


class Timeline:
    """Times named regions of a training step; not thread-safe (one per training thread).

    `clock` (default `time.perf_counter`) is injectable for tests; `events` switches region
    timing to a device backend such as `CudaEvents`. `client` (with `rank`, `step`): the
    regions are also logged as events (module doc).
    """

    def __init__(
        self,
        clock: Callable[[], float] = time.perf_counter,
        events: EventBackend | None = None,
        *,
        client: EventSink | None = None,
        rank: int | None = None,
        step: int = 0,
    ) -> None:
        self._clock = clock
        self._events = events
        self._step: _Step | None = None
        self._open: set[str] = set()
        self._microbatch: int | None = None
        self._client = client
        self._rank = rank
        self._next_step = step
        self._unix = time.time() - clock()  # clock reading + this = unix seconds

    @classmethod
    def cuda(cls, clock: Callable[[], float] = time.perf_counter) -> Timeline:
        """A timeline whose regions are timed with CUDA events."""
        return cls(clock=clock, events=CudaEvents())

    def start_step(self) -> None:
        """Start a new step now (otherwise the first region or microbatch starts it)."""
        self._step = _Step(started=self._clock())

    @contextmanager
    def region(self, op: str) -> Iterator[None]:
        """Time the body as one occurrence of `op` (different ops may nest; one op may not)."""
        if not _OP_NAME.match(op):
            raise ValueError(f"op {op!r} must be lower_snake_case (it becomes timing_{op}_total)")
        if op in self._open:
            raise ValueError(f"region {op!r} is already open; it would be counted twice")
        step = self._current()
        device = self._events is not None and op != WAITING
        span = _Span(op, self._microbatch, self._mark(device), device=device,
                     cpu=self._clock() if device else 0.0)
        self._open.add(op)
        try:
            yield
        finally:
            span.end = self._mark(device)
            self._open.discard(op)
            step.spans.append(span)

    @contextmanager
    def microbatch(self) -> Iterator[int]:
        """Mark a microbatch; regions inside count toward the per-microbatch means."""
        if self._microbatch is not None:
            raise ValueError("microbatches do not nest")
        step = self._current()
        self._microbatch = step.microbatches
        step.microbatches += 1
        try:
            yield self._microbatch
        finally:
            self._microbatch = None

    def step_metrics(self, step: int | None = None) -> dict[str, float]:
        """End the step: synchronise once (device events) and return its timeline keys; with
        a client, log its regions as events of step `step` (default: the next step number).

        Raises if a region or microbatch is still open. The next step starts now.
        """
        if self._open or self._microbatch is not None:
            raise RuntimeError(f"step_metrics() inside open regions {sorted(self._open)}")
        current = self._current()
        if self._events is not None and any(span.device for span in current.spans):
            self._events.synchronize()
        ended = self._clock()
        self._step = _Step(started=ended)
        number = self._next_step if step is None else step
        self._next_step = number + 1
        if self._client is not None:
            self._log_events(current, number)
        return _metrics(current, ended - current.started, self._duration)

    def _log_events(self, step: _Step, number: int) -> None:
        """The step's regions (but the wait for data) as one `log_events` call."""
        spans = [span for span in step.spans if span.op != WAITING]
        if not spans or self._client is None:
            return
        starts: list[float] = []
        ends: list[float] = []
        for span in spans:
            begin = self._unix + (span.cpu if span.device else float(span.start))
            starts.append(begin)
            ends.append(begin + self._duration(span))
        if self._rank is None:
            self._rank = distributed_rank()
        self._client.log_events(name=[span.op for span in spans], start=starts, end=ends,
                                source="trainer", step=number, rank=self._rank)

    def _current(self) -> _Step:
        if self._step is None:
            self.start_step()
        assert self._step is not None
        return self._step

    def _mark(self, device: bool) -> Any:
        if device:
            assert self._events is not None
            return self._events.record()
        return self._clock()

    def _duration(self, span: _Span) -> float:
        if span.device:
            assert self._events is not None
            return self._events.elapsed(span.start, span.end)
        return float(span.end - span.start)


def distributed_rank() -> int | None:
    """torch.distributed's rank when a process group is initialised, else None (torch is not
    imported for it: a job that never imported torch has no process group)."""
    torch = sys.modules.get("torch")
    dist = getattr(torch, "distributed", None)
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return None
    return int(dist.get_rank())


def _metrics(step: _Step, wall: float, duration: Callable[[_Span], float]) -> dict[str, float]:
    totals: dict[str, float] = {}
    per_micro: dict[str, dict[int, float]] = {}
    for span in step.spans:
        seconds = duration(span)
        totals[span.op] = totals.get(span.op, 0.0) + seconds
        if span.microbatch is not None:
            bucket = per_micro.setdefault(span.op, {})
            bucket[span.microbatch] = bucket.get(span.microbatch, 0.0) + seconds
    waiting = totals.get(WAITING, 0.0)
    out = {
        "timing_step_total": wall,
        "timing_step_active": max(wall - waiting, 0.0),
        "timing_waiting_for_data": waiting,
    }
    for op in sorted(totals):
        if op != WAITING:  # Telescope names the wait without the _total suffix
            out[f"timing_{op}_total"] = totals[op]
    for op in sorted(per_micro):
        out[f"timing_{op}_microbatch_mean"] = sum(per_micro[op].values()) / len(per_micro[op])
    return out
