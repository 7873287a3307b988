"""`TimelineRecorder`: a client's buffers of spans, events and gauges, and the thread that
flushes them as `events` and `gauges` messages.

Spans (`Span`) append row tuples, `log_events` / `log_gauges` append their call's columns as
given. A daemon thread (`telescope-timeline[<run>]`) takes everything buffered every
`max_age` seconds, or as soon as spans reach `max_rows`, checks it column by column
(`timeline.columns`: a row the server would refuse is left out and reported, never costing its
message), and hands `send` one message per `max_rows` rows. `send` is the client's way into
its durable outbox, so these messages are sealed, spooled, sent and acknowledged like the
others. `drain()` does the same at once on the calling thread: the client calls it in
`flush()` and `close()`, so a flush waits for what was logged before it.

Concurrency: the caller's threads only append (no lock); drains hold `_lock` (one at a time,
so messages leave in the order rows were taken). A caller that outruns the thread by
`BACKLOG` times `max_rows` spans drains on its own thread (back-pressure, never a loss).
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from trainer_hooks.timeline import columns as cols
from trainer_hooks.timeline.spans import Rows
from trainer_hooks.wire.events import EVENT_COLUMNS, GAUGE_COLUMNS
from trainer_hooks.wire.schema import MAX_EVENTS_PER_MESSAGE

log = logging.getLogger("trainer_hooks.timeline")

MAX_ROWS = 4096  # rows per message, and the spans that wake the flushing thread
MAX_AGE = 1.0  # seconds a buffered row waits at most
CALLS_WAKE = 256  # log_events / log_gauges calls that wake it
BACKLOG = 16  # the caller drains itself past BACKLOG * max_rows spans


class Problems(Protocol):
    """Where a recorder reports what it could not send (the client's bookkeeping)."""

    def left_out(self, what: str, count: int, why: str) -> None: ...

    def failed(self, where: str, exc: BaseException) -> None: ...


class TimelineRecorder:
    """Buffers spans, events and gauges and flushes them through `send` (see module doc)."""

    def __init__(self, send: Callable[[dict[str, Any]], None], problems: Problems, *,
                 lists_for_nulls: bool, max_rows: int = MAX_ROWS, max_age: float = MAX_AGE,
                 label: str = "") -> None:
        if not 1 <= max_rows <= MAX_EVENTS_PER_MESSAGE:
            raise ValueError(f"max_rows must be 1–{MAX_EVENTS_PER_MESSAGE}")
        self._send = send
        self._problems = problems
        self._lists_for_nulls = lists_for_nulls
        self.max_rows = max_rows
        self.max_age = max_age
        self.spans = Rows(max_rows, self._spans_full)
        self.event_calls = Rows(CALLS_WAKE, self._wake_up)
        self.gauge_calls = Rows(CALLS_WAKE, self._wake_up)
        self.logged_events = 0
        self.logged_gauges = 0
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopping = False
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name=f"telescope-timeline[{label}]")
        self._thread.start()

    # ---------------------------------------------------------------- caller's side

    def _wake_up(self) -> None:
        if not self._wake.is_set():
            self._wake.set()

    def _spans_full(self) -> None:
        self._wake_up()
        if len(self.spans) >= BACKLOG * self.max_rows:
            try:
                self.drain()
            except Exception as exc:  # noqa: BLE001 - never into the caller's block
                self._problems.failed("timeline", exc)

    def close(self, timeout: float | None = 5.0) -> None:
        """Stop the flushing thread after a last drain; what is buffered is sent."""
        self._stopping = True
        self._wake.set()
        self._thread.join(timeout)
        self.drain()

    # ---------------------------------------------------------------- flushing

    def _run(self) -> None:
        while True:
            self._wake.wait(self.max_age)
            self._wake.clear()
            stopping = self._stopping
            try:
                self.drain()
            except Exception as exc:  # noqa: BLE001 - the thread must go on
                self._problems.failed("timeline", exc)
            if stopping:
                return

    def drain(self) -> None:
        """Take everything buffered and send it as messages now (any thread)."""
        with self._lock:
            spans = self.spans.take()
            event_calls = self.event_calls.take()
            gauge_calls = self.gauge_calls.take()
            if spans or event_calls:
                self._flush("events", EVENT_COLUMNS, spans, event_calls)
            if gauge_calls:
                self._flush("gauges", GAUGE_COLUMNS, [], gauge_calls)

    def _flush(self, kind: str, names: tuple[str, ...], row_tuples: list[tuple[Any, ...]],
               calls: list[tuple[Any, ...]]) -> None:
        n, columns = self._columns(kind, names, row_tuples, calls)
        if not n:
            return
        clean = cols.clean_events if kind == "events" else cols.clean_gauges
        cleaned = clean(columns, n)
        for column, (count, example) in cleaned.problems.items():
            self._problems.left_out(f"{kind}: {column}", count, example)
        kept, wire = cols.wire_columns(cleaned, kind, lists_for_nulls=self._lists_for_nulls)
        if not kept:
            return
        for piece in cols.pieces(wire, kept, self.max_rows):
            self._send({"type": kind, **piece})
        if kind == "events":
            self.logged_events += kept
        else:
            self.logged_gauges += kept

    def _columns(self, kind: str, names: tuple[str, ...], row_tuples: list[tuple[Any, ...]],
                 calls: list[tuple[Any, ...]]) -> tuple[int, dict[str, list[Any]]]:
        """Rows and calls as one list per column (a call's one value for all repeated)."""
        parts: list[tuple[int, dict[str, list[Any]]]] = []
        if row_tuples:
            parts.append((len(row_tuples), dict(zip(names, map(list, zip(*row_tuples, strict=True)),
                                                    strict=True))))
        for call in calls:
            try:
                parts.append(call_columns(dict(zip(names, call, strict=True))))
            except (TypeError, ValueError) as exc:
                self._problems.left_out(f"log_{kind}", 1, f"{type(exc).__name__}: {exc}")
        n = sum(k for k, _ in parts)
        if not parts:
            return 0, {}
        if len(parts) == 1:
            return parts[0]
        merged = {name: list(itertools.chain.from_iterable(
            part.get(name) or itertools.repeat(None, k) for k, part in parts)) for name in names}
        return n, merged


def call_columns(call: dict[str, Any]) -> tuple[int, dict[str, list[Any]]]:
    """One `log_events` / `log_gauges` call as (N, {column: list of N}): lists, tuples, numpy
    arrays and tensors are columns, anything else one value for all rows; columns of different
    lengths are a ValueError naming them."""
    lists: dict[str, list[Any]] = {}
    scalars: dict[str, Any] = {}
    for name, value in call.items():
        if value is None:
            continue
        column = as_column(value)
        if column is None:
            scalars[name] = _plain(value)
        else:
            lists[name] = column
    lengths = {name: len(v) for name, v in lists.items()}
    n = next(iter(lengths.values()), 1)
    if any(k != n for k in lengths.values()):
        raise ValueError("columns of different lengths: " + ", ".join(
            f"{name} has {k}" for name, k in lengths.items()))
    for name, value in scalars.items():
        lists[name] = [value] * n
    return n, lists


def as_column(value: Any) -> list[Any] | None:
    """A list of a column's values, or None for one value (a string, a number, a 0-d array)."""
    if isinstance(value, list):
        return value
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, np.ndarray) or hasattr(value, "tolist"):  # numpy, torch
        listed = value.tolist()
        if isinstance(listed, list):
            return listed
    return None


def _plain(value: Any) -> Any:
    """A numpy or torch scalar as a Python one."""
    item = getattr(value, "item", None)
    return item() if item is not None and not isinstance(value, (str, bytes)) else value
