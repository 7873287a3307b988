"""What the client's timeline (`trainer_hooks.timeline`) needs from the transport: the
bookkeeping its recorder reports to, and the shape of the background producers a client
stops on close."""

from __future__ import annotations

from typing import Protocol

from trainer_hooks.transport.bookkeeping import Bookkeeping

SYSTEM_METRICS_INTERVAL = 10.0  # seconds between system samples (`system_metrics=True`)


class Stoppable(Protocol):
    """A background producer attached to a client (`Client.attach`)."""

    def stop(self) -> None: ...


class TimelineBooks:
    """`timeline.recorder.Problems` over a client's bookkeeping: rows left out count as
    `invalid_values` (a flush then reports False) and are named in `not_stored`."""

    def __init__(self, books: Bookkeeping) -> None:
        self.books = books

    def left_out(self, what: str, count: int, why: str) -> None:
        self.books.count("invalid_values", count)
        self.books.ledger.add("invalid value", what, count, why)
        self.books.warn_once(("timeline", what), "telescope: %s: %d rows left out (counted in "
                             "stats, logged once): %s", what, count, why)

    def failed(self, where: str, exc: BaseException) -> None:
        self.books.count("internal_errors")
        self.books.warn_once(("internal", where, type(exc)), "telescope: %s error: %r", where,
                             exc)
