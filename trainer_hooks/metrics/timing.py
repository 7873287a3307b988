"""`Timeline`: per-step region timings under Telescope's timeline keys.

    timeline = Timeline()                        # Timeline.cuda() on GPU
    with timeline.region("waiting_for_data"):
        batch = next(loader)
    for micro in split(batch):
        with timeline.microbatch():
            with timeline.region("forward"):
                ...
    metrics = timeline.step_metrics()            # ends the step, starts the next

Keys (seconds): `timing_<op>_total` (the op's total in the step), `timing_<op>_microbatch_mean`
(mean per microbatch, over the microbatches in which the op ran), `timing_step_total` (wall time
from the step's start to `step_metrics()`), `timing_step_active` (step total minus waiting for
data) and `timing_waiting_for_data`. With CUDA events a region records two events on the current
stream and nothing waits until `step_metrics()`, which synchronises once for the whole step;
`waiting_for_data` always uses the CPU clock, since the GPU is idle while the loader blocks.
"""

from __future__ import annotations

import re
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


@dataclass
class _Span:
    op: str
    microbatch: int | None
    start: Any
    end: Any = None
    device: bool = False  # start/end are backend events rather than clock readings


@dataclass
class _Step:
    started: float
    spans: list[_Span] = field(default_factory=list)
    microbatches: int = 0


class Timeline:
    """Times named regions of a training step; not thread-safe (one per training thread).

    `clock` (default `time.perf_counter`) is injectable for tests; `events` switches region
    timing to a device backend such as `CudaEvents`.
    """

    def __init__(
        self,
        clock: Callable[[], float] = time.perf_counter,
        events: EventBackend | None = None,
    ) -> None:
        self._clock = clock
        self._events = events
        self._step: _Step | None = None
        self._open: set[str] = set()
        self._microbatch: int | None = None

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
        span = _Span(op, self._microbatch, self._mark(device), device=device)
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

    def step_metrics(self) -> dict[str, float]:
        """End the step: synchronise once (device events) and return its timeline keys.

        Raises if a region or microbatch is still open. The next step starts now.
        """
        if self._open or self._microbatch is not None:
            raise RuntimeError(f"step_metrics() inside open regions {sorted(self._open)}")
        step = self._current()
        if self._events is not None and any(span.device for span in step.spans):
            self._events.synchronize()
        ended = self._clock()
        self._step = _Step(started=ended)
        return _metrics(step, ended - step.started, self._duration)

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
