"""What the caller's thread hands the sender thread: queue entry tags, the waiter behind
`flush()` / `sync()`, the names of the sender's counters and the ledger of values not stored.

The queue itself is a `collections.deque` of tuples whose first item is one of the tags below;
appending to it is the only thing a `log_*` call does on the caller's thread.
"""

from __future__ import annotations

import collections
import threading
from typing import Any

STEP, SAMPLES, REWARDS, CONTROL, FLUSH, SYNC, STOP = range(7)

STAT_NAMES = (
    "logged_steps", "logged_samples", "sent", "bytes_sent", "acked", "duplicates", "rejected",
    "connects", "reconnects", "splits", "replayed", "deduped_samples", "invalid_calls",
    "invalid_values", "dropped_queue_full", "dropped_closed", "dropped_spool_full",
    "dropped_too_large", "spool_errors", "internal_errors", "frames", "waited_queue_full",
)
# counters that make a flush report failure when they grew since the previous flush
LOSSES = ("invalid_calls", "invalid_values", "dropped_queue_full", "dropped_closed",
          "dropped_spool_full", "dropped_too_large", "rejected")


class Ledger:
    """Every value a client did not store, and why: `entries` keeps the latest `keep` records
    ({"reason", "what", "count", "why"}), `total` counts the values of them all. Written
    from both threads, only on error paths."""

    def __init__(self, keep: int = 1000) -> None:
        self._lock = threading.Lock()
        self.entries: collections.deque[dict[str, Any]] = collections.deque(maxlen=keep)
        self.total = 0

    def add(self, reason: str, what: str, count: int = 1, why: str = "") -> None:
        with self._lock:
            self.entries.append({"reason": reason, "what": what, "count": count, "why": why})
            self.total += count

    def snapshot(self) -> list[dict[str, Any]]:
        with self._lock:
            return [dict(e) for e in self.entries]


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
