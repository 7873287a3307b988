"""What the caller's thread hands the sender thread: queue entry tags, the waiter behind
`flush()` / `sync()`, and the names of the sender's counters.

The queue itself is a `collections.deque` of tuples whose first item is one of the tags below;
appending to it is the only thing a `log_*` call does on the caller's thread.
"""

from __future__ import annotations

import threading

STEP, SAMPLES, REWARDS, CONTROL, FLUSH, SYNC, STOP = range(7)

STAT_NAMES = (
    "logged_steps", "logged_samples", "sent", "bytes_sent", "acked", "duplicates", "rejected",
    "connects", "reconnects", "splits", "replayed", "deduped_samples", "invalid_calls",
    "invalid_values", "dropped_queue_full", "dropped_closed", "dropped_spool_full",
    "dropped_too_large", "spool_errors", "internal_errors",
)
# counters that make a flush report failure when they grew since the previous flush
LOSSES = ("invalid_calls", "dropped_queue_full", "dropped_closed", "dropped_spool_full",
          "dropped_too_large", "rejected")


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
