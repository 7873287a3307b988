"""The caller's side of spans: `Span`, what `client.span(...)` returns, and `Rows`, the buffer
it appends to.

    with client.span("generation", source="inference", server=0, slot=3) as sp:
        out = engine.generate(prompt)
        sp.tokens = len(out.token_ids)

A span reads `time.time()` when its block starts and ends and appends one tuple (EVENT_COLUMNS
order) to its client's `Rows`: no message per span, no lock, no check on the caller's thread
(the flushing thread checks the rows, `timeline.columns`). A block that raises still records its
span, with nothing marked; the exception goes on. Any field can be set inside the block.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from types import TracebackType
from typing import Any

_now = time.time


class Rows(list[Any]):
    """Rows appended from any thread (`list.append` is atomic) and taken by the flushing thread
    (`take`); `full` is called on an append that brings the buffer to `limit` rows or more."""

    __slots__ = ("full", "limit")

    def __init__(self, limit: int, full: Callable[[], None]) -> None:
        super().__init__()
        self.limit = limit
        self.full = full

    def take(self) -> list[Any]:
        """Every row appended so far, removed. Appends meanwhile land after the rows taken and
        stay (a slice copy and a slice delete, each one step under the GIL)."""
        n = len(self)
        taken = self[:n]
        del self[:n]
        return taken


class Span:
    """One span being timed (`Client.span`); a context manager. Set `tokens`, `status`,
    `step` or any other field inside the block; `start` is its start (unix s) once entered."""

    __slots__ = ("_rows", "group_id", "name", "rank", "sample_id", "server", "slot", "source",
                 "start", "status", "step", "tokens")

    def __init__(self, rows: Rows, name: Any, source: Any, step: Any, rank: Any, server: Any,
                 slot: Any, status: Any, tokens: Any, sample_id: Any, group_id: Any) -> None:
        self._rows = rows
        self.name = name
        self.source = source
        self.step = step
        self.rank = rank
        self.server = server
        self.slot = slot
        self.status = status
        self.tokens = tokens
        self.sample_id = sample_id
        self.group_id = group_id
        self.start: float | None = None

    def __enter__(self) -> Span:
        self.start = _now()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        rows = self._rows
        rows.append((self.name, self.start, _now(), self.source, self.step, self.rank,
                     self.server, self.slot, self.status, self.tokens, self.sample_id,
                     self.group_id))
        if len(rows) >= rows.limit:
            rows.full()

    def __repr__(self) -> str:
        return f"Span({self.name!r}, start={self.start!r})"
