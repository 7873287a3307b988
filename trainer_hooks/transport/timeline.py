"""The client's side of where the time goes: `TimelineCalls` (`span`, `log_events`,
`log_gauges`, `attach`, mixed into `Client`) over its `timeline.recorder.TimelineRecorder`,
the bookkeeping that recorder reports to (`TimelineBooks`), and the shape of the background
producers a client stops on close (`Stoppable`)."""

from __future__ import annotations

import time
from typing import Any, Protocol

from trainer_hooks.timeline.recorder import TimelineRecorder
from trainer_hooks.timeline.spans import Rows, Span
from trainer_hooks.transport.bookkeeping import Bookkeeping, Ledger

_now = time.time
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


class TimelineCalls:
    """`Client`'s spans, events and gauges (caller's threads): a span appends one row tuple
    to the recorder's `Rows`, `log_events` / `log_gauges` one call tuple (EVENT_COLUMNS /
    GAUGE_COLUMNS order); nothing else happens on the caller's thread. After `close()` they
    are counted (`dropped_closed`) and named in `not_stored`."""

    _timeline: TimelineRecorder
    _spans: Rows
    _closed: bool
    _books: Bookkeeping
    ledger: Ledger
    _attached: list[Stoppable]

    def _snapshot(self, call: tuple[Any, ...]) -> tuple[Any, ...]:
        """The call's columns as the recorder keeps them (the client copies them with
        `copy_columns=True`)."""
        return call

    def _caller_problem(self, where: str, exc: Exception) -> None:
        raise NotImplementedError

    def span(self, name: str, *, source: str = "trainer", step: int | None = None,
             rank: int | None = None, server: str | int | None = None,
             slot: int | None = None, status: str | None = None, tokens: int | None = None,
             sample_id: str | int | None = None, group_id: str | int | None = None) -> Span:
        """A context manager timing its block as one span of the `events` columns (unix
        seconds from time.time()); set fields inside it (`sp.tokens = n`). A block that raises
        still records its span. Never raises; checked on the flushing thread."""
        rows = self._spans if not self._closed else self._closed_rows()
        return Span(rows, name, source, step, rank, server, slot, status, tokens, sample_id,
                    group_id)

    def log_events(self, *, name: Any, start: Any, end: Any = None, source: Any = None,
                   step: Any = None, rank: Any = None, server: Any = None, slot: Any = None,
                   status: Any = None, tokens: Any = None, sample_id: Any = None,
                   group_id: Any = None) -> None:
        """Queue spans (or instants: no `end`) already timed, columnar: lists, arrays or
        tensors of one length N, or one value for all (`source="inference"`). Never raises."""
        self._buffer("log_events", self._timeline.event_calls, (
            name, start, end, source, step, rank, server, slot, status, tokens, sample_id,
            group_id))

    def log_gauges(self, *, name: Any, value: Any, time: Any = None, host: Any = None,
                   device: Any = None) -> None:
        """Queue time-series points, columnar like `log_events` (`time` default: now; `host`
        a string, `device` a string or an int). Never raises."""
        self._buffer("log_gauges", self._timeline.gauge_calls,
                     (_now() if time is None else time, name, value, host, device))

    def attach(self, worker: Stoppable) -> None:
        """A background producer of this client's gauges or events (`SystemSampler`,
        `watch_prometheus`): `close()` stops it first, then sends what it logged."""
        self._attached.append(worker)

    def _buffer(self, where: str, rows: Rows, call: tuple[Any, ...]) -> None:
        try:
            if self._closed:
                rows = self._closed_rows()
            else:
                call = self._snapshot(call)
            rows.append(call)
            if len(rows) >= rows.limit:
                rows.full()
        except Exception as exc:  # noqa: BLE001
            self._caller_problem(where, exc)

    def _closed_rows(self) -> Rows:
        """Where spans and events logged after close() go: counted and named, not stored."""
        def dropped() -> None:
            n = len(rows)
            del rows[:n]
            self._books.count("dropped_closed", n)
            self.ledger.add("closed", "spans, events or gauges", n, "logged after close()")
            self._books.warn_once("closed", "telescope: a log call after close() is not "
                                  "stored (counted in stats)")
        rows = Rows(0, dropped)
        return rows
