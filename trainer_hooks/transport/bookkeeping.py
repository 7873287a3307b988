"""A client's bookkeeping, kept by its caller's side and its sender thread alike: the counters
(`STAT_NAMES`, `client.stats`), the ledger of values not stored and why (`client.not_stored`),
and warnings logged once.

Written from both threads (the caller's only on error paths and back-pressure), so every
write takes a lock; `Client.stats` reads a copy.
"""

from __future__ import annotations

import collections
import logging
import threading
from typing import Any

from trainer_hooks.warnonce import WarnOnce

STAT_NAMES = (
    "logged_steps", "logged_samples", "sent", "bytes_sent", "acked", "duplicates", "rejected",
    "connects", "reconnects", "splits", "text_as_lists", "labels_as_lists", "replayed",
    "deduped_samples", "invalid_calls", "invalid_values", "dropped_queue_full", "dropped_closed",
    "dropped_spool_full", "dropped_too_large", "spool_errors", "internal_errors", "frames",
    "waited_queue_full", "lost_unspooled", "unconfirmed_unspooled", "ack_timeouts",
    "lost_sender_died", "sender_restarts",
)
# counters that make a flush report failure when they grew since the previous flush
LOSSES = ("invalid_calls", "invalid_values", "dropped_queue_full", "dropped_closed",
          "dropped_spool_full", "dropped_too_large", "rejected", "lost_sender_died")


class Ledger:
    """Every value a client did not store, and why: `entries` keeps the latest `keep` records
    ({"reason", "what", "count", "why"}), `total` counts the values of them all."""

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


class Bookkeeping:
    """Counters, the ledger and warn-once for one client (any thread)."""

    def __init__(self, logger: logging.Logger) -> None:
        self.ledger = Ledger()
        self._lock = threading.Lock()
        self._counts = dict.fromkeys(STAT_NAMES, 0)
        self.warn_once = WarnOnce(logger)  # warn_once(key, msg, *args): logged the first time

    def count(self, name: str, n: int = 1) -> None:
        if n:
            with self._lock:
                self._counts[name] += n

    def __getitem__(self, name: str) -> int:
        return self._counts[name]

    def counts(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)

    def losses(self) -> int:
        """Values lost so far, of every kind (a flush compares it with the previous one's)."""
        with self._lock:
            return sum(self._counts[name] for name in LOSSES)
