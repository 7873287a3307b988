"""What the caller's threads hand the sender thread, and the callers waiting on it.

`CallQueue` holds the `log_*` calls the sender thread has not taken yet: a deque of `Call`
records (one NamedTuple per kind of call, below). Building one and appending it is the only
thing a `log_*` call does on the caller's thread, so the client builds the hot ones with
`tuple.__new__(Kind, (fields...))`: one tuple built in C, no Python frame (a dataclass's
`__init__` or a NamedTuple's generated `__new__` made a call after an idle pause — a training
step — several µs dearer, measured with bench/hooks_sender.py); at `max_size` entries a call
waits for room (back-pressure). `Waiter` is a caller blocked in `flush()` or `sync()`;
`FlushWaiters` keeps, on the sender thread, the flushes waiting for their messages to leave the
outbox.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable
from typing import Any, NamedTuple

from trainer_hooks.transport.outbox import Outbox


class StepCall(NamedTuple):
    """`log_step(step, metrics, time=)`: `metrics` is the caller's dict, copied."""

    step: Any
    metrics: dict[str, Any]
    time: Any


class SamplesCall(NamedTuple):
    """`log_samples(...)`: the caller's columns as given (by reference unless `copy_columns`),
    read and validated on the sender thread. The fields after `metrics` are the optional
    columns (`wire.protocol.OPTIONAL_COLUMNS`), None when not given."""

    step: Any
    sample_id: Any
    group_id: Any
    reward: Any
    env: Any
    metrics: dict[str, Any] | None
    advantage: Any
    prompt_tokens: Any
    completion_tokens: Any
    off_policy_steps: Any
    stop_reason: Any
    discard_reason: Any
    prompt: Any
    completion: Any
    time: Any


class RewardsCall(NamedTuple):
    """`log_rewards(step, results, ...)`: `columns` holds the optional columns given."""

    step: Any
    results: list[Any]
    sample_id: Any
    group_id: Any
    env: Any
    columns: dict[str, Any]
    time: float


class ControlCall(NamedTuple):
    """A message the client sends as it is: run.start, ranges, run.end or barrier."""

    message: dict[str, Any]


class FlushCall(NamedTuple):
    """`flush()`: resolve `waiter` once everything queued before it left the outbox."""

    waiter: Waiter


class SyncCall(NamedTuple):
    """`sync()`: resolve `waiter` once everything queued before it is in the outbox."""

    waiter: Waiter


class StopCall(NamedTuple):
    """`close()`: the sender thread stops after sealing everything queued before it."""


Call = StepCall | SamplesCall | RewardsCall | ControlCall | FlushCall | SyncCall | StopCall


class CallQueue:
    """The log calls waiting for the sender thread. Entries are appended from any thread
    (`entries.append`: a deque append is atomic) and taken on the sender thread, which sets
    `room` whenever it leaves fewer than `max_size` entries behind."""

    def __init__(self, max_size: int) -> None:
        self.entries: collections.deque[Call] = collections.deque()
        self.max_size = max_size
        self.room = threading.Event()

    def __len__(self) -> int:
        return len(self.entries)

    def has_room(self) -> bool:
        return len(self.entries) < self.max_size

    def take(self, limit: int) -> list[Call]:
        """Up to `limit` entries, oldest first (sender thread); wakes the callers waiting for
        room when there is some."""
        entries = self.entries
        taken = [entries.popleft() for _ in range(min(limit, len(entries)))]
        if len(entries) < self.max_size:
            self.room.set()
        return taken


class Waiter:
    """A caller blocked in `flush()` / `sync()`; resolved once, from the sender thread.

    `target` is the outbox sequence number that must be acknowledged first."""

    __slots__ = ("event", "ok", "target")

    def __init__(self) -> None:
        self.event = threading.Event()
        self.ok = False
        self.target = 0

    def resolve(self, ok: bool) -> None:
        self.ok = ok
        self.event.set()

    def wait(self, timeout: float | None) -> bool:
        return self.event.wait(timeout) and self.ok


class FlushWaiters:
    """The flushes waiting until every message sealed before them has left `outbox`
    (acknowledged or rejected). Sender thread only.

    A flush resolves True when no value was lost since the previous flush resolved (`losses`
    counts every value lost so far), and False once sending stopped for good (`fail_all`)."""

    def __init__(self, outbox: Outbox, losses: Callable[[], int]) -> None:
        self.outbox = outbox
        self.losses = losses
        self.waiting: list[Waiter] = []
        self.losses_seen = 0
        self.failed = False

    def add(self, waiter: Waiter) -> None:
        """Wait for everything now in the outbox."""
        waiter.target = self.outbox.last_seq
        self.waiting.append(waiter)

    def requeued(self) -> None:
        """Messages went back to the end of the outbox (the halves of a split): every flush
        waits for them too."""
        for waiter in self.waiting:
            waiter.target = max(waiter.target, self.outbox.last_seq)

    def check(self) -> None:
        """Resolve the flushes whose messages have all left the outbox."""
        if not self.waiting:
            return
        if self.failed:
            self.resolve_all(False)
            return
        low = self.outbox.min_seq()
        done = [w for w in self.waiting if low is None or low > w.target]
        if done:
            lost = self.losses()
            ok, self.losses_seen = lost == self.losses_seen, lost
            self.waiting = [w for w in self.waiting if w not in done]
            for waiter in done:
                waiter.resolve(ok)

    def fail_all(self) -> None:
        """Sending stopped for good: every flush, now and later, resolves False."""
        self.failed = True
        self.resolve_all(False)

    def resolve_all(self, ok: bool) -> None:
        waiting, self.waiting = self.waiting, []
        for waiter in waiting:
            waiter.resolve(ok)
