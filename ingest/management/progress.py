"""Progress of a long command (`telescope import`, `declare-ranges`, `demo`, `manage.py
materialize`), written to stderr so that stdout keeps only the command's results.

- On a terminal: one line redrawn in place with `\\r`, at most 10 times a second:
  `import 'run-1' [#########.....................] 1,200/4,000 steps  3,400 steps/s`.
- Anywhere else (a pipe, a log file, CI): plain lines, each ended by a newline and never a `\\r`,
  one per tenth of the total and at least one every `every` seconds while it moves:
  `import 'run-1': 1,200/4,000 steps (30%)`.

Hand-written rather than tqdm (not a dependency of the server, and it writes `\\r` redraws to
pipes and files too) or rich (a dependency for one line): this module is all the commands need.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from types import TracebackType
from typing import TextIO

REDRAW_SECONDS = 0.1  # a terminal's line at most this often
PLAIN_SECONDS = 10.0  # elsewhere, a line at least this often while the count moves
WIDTH = 30  # the bar's characters
CLEAR = "\x1b[K"  # erase to the end of the line: a shorter redraw leaves nothing behind


def is_terminal(stream: TextIO) -> bool:
    """Whether `stream` is an interactive terminal that understands `\\r` redraws."""
    try:
        return stream.isatty() and os.environ.get("TERM") != "dumb"
    except (AttributeError, ValueError):  # no isatty, or closed
        return False


class Progress:
    """`done` of `total` `unit`s of the work named `label`: call `update(done)` (or the object
    itself, as `progress(done, total)` callbacks are called) as often as convenient; it draws
    only when something would show; `close()` (or the end of a `with` block) ends the line.
    `total` may be unknown (None) or learned later (an `update` that gives it)."""

    def __init__(self, label: str, total: int | None = None, unit: str = "steps",
                 stream: TextIO | None = None, *, every: float = PLAIN_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.label, self.total, self.unit = label, total, unit
        self.stream = stream if stream is not None else sys.stderr
        self.terminal = is_terminal(self.stream)
        self.every, self.clock = every, clock
        self.started = self.drawn = clock()
        self.done = 0
        self.shown: int | None = None  # the count last written
        self.tenth = -1  # plain lines: the last tenth of the total written
        self.open = False  # a terminal line drawn and not yet ended

    def __call__(self, done: int, total: int | None = None) -> None:
        self.update(done, total)

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def update(self, done: int, total: int | None = None) -> None:
        if total is not None:
            self.total = total
        self.done = done
        now = self.clock()
        if self.terminal:
            if now - self.drawn >= REDRAW_SECONDS or self.shown is None or self.finished:
                self._redraw(self._bar(now), now)
            return
        tenth = min(10, 10 * done // self.total) if self.total else -1
        if (self.shown is None or tenth > self.tenth
                or (done != self.shown and now - self.drawn >= self.every)):
            self.tenth = max(self.tenth, tenth)
            self._line(self._plain(), now)

    def note(self, text: str) -> None:
        """A stage without a count yet (`reading…`): drawn in place on a terminal, a line
        elsewhere."""
        shown = self.shown  # no count written
        if self.terminal:
            self._redraw(f"{self.label}: {text}", self.clock())
        else:
            self._line(f"{self.label}: {text}", self.clock())
        self.shown = shown

    def close(self, text: str | None = None) -> None:
        """End the progress: the last count (unless already written) and `text` if given,
        then a newline on a terminal."""
        if self.terminal:
            if self.shown != self.done or text:
                line = self._bar(self.clock())
                self._redraw(f"{line}  {text}" if text else line, self.clock())
            if self.open:
                self.stream.write("\n")
                self.stream.flush()
                self.open = False
        elif self.shown != self.done or text:
            self._line(f"{self._plain()}{f' {text}' if text else ''}", self.clock())

    def clear(self) -> None:
        """Erase the terminal's line (before another message is written, e.g. a warning or an
        error); the next update draws it again. Nothing to do for plain lines."""
        if self.open:
            self.stream.write(f"\r{CLEAR}")
            self.stream.flush()
            self.open, self.shown = False, None

    @property
    def finished(self) -> bool:
        return self.total is not None and self.done >= self.total

    def _count(self) -> str:
        return (f"{self.done:,}/{self.total:,} {self.unit}" if self.total is not None
                else f"{self.done:,} {self.unit}")

    def _plain(self) -> str:
        pct = f" ({100 * self.done // self.total}%)" if self.total else ""
        return f"{self.label}: {self._count()}{pct}"

    def _bar(self, now: float) -> str:
        rate = self.done / max(now - self.started, 1e-9)
        bar = ""
        if self.total is not None:
            filled = min(WIDTH, WIDTH * self.done // self.total if self.total else WIDTH)
            bar = f" [{'#' * filled}{'.' * (WIDTH - filled)}]"
        return f"{self.label}{bar} {self._count()}  {rate:,.0f} {self.unit}/s"

    def _redraw(self, text: str, now: float) -> None:
        self.stream.write(f"\r{text}{CLEAR}")
        self.stream.flush()
        self.open, self.drawn, self.shown = True, now, self.done

    def _line(self, text: str, now: float) -> None:
        self.stream.write(text + "\n")
        self.stream.flush()
        self.drawn, self.shown = now, self.done
