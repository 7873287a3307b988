"""Give the memory a burst of ingest freed back to the system.

A flood's frames are freed once applied or dropped (ingest.write.consumers), but glibc's
allocator keeps the freed pages of its heap for reuse: the server's RSS would stay at the
flood's peak. Once enough bytes of frames have been let go (TRIM_BYTES), `malloc_trim(0)` —
at once, or TRIM_SECONDS after the last trim (so a long flood trims at most that often, and
its tail is trimmed too) — returns the heap's free pages to the system, on a thread
of its own (ctypes releases the GIL for the call; it takes a few milliseconds). Where the C
library is not glibc there is no `malloc_trim`, and nothing is done.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import threading
import time
from typing import Any

log = logging.getLogger(__name__)

TRIM_BYTES = 8 << 20
TRIM_SECONDS = 2.0


def _malloc_trim() -> Any:
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None


class Trimmer:
    """Counts the bytes let go and trims when they add up (thread-safe)."""

    def __init__(self, trim: Any = None, min_bytes: int = TRIM_BYTES,
                 min_seconds: float = TRIM_SECONDS) -> None:
        self.trim = _malloc_trim() if trim is None else trim
        self.min_bytes, self.min_seconds = min_bytes, min_seconds
        self.freed = 0
        self.last = float("-inf")
        self.busy = False
        self.trims = 0
        self.lock = threading.Lock()

    def let_go(self, size: int) -> None:
        """`size` bytes of frames were freed."""
        if self.trim is None:
            return
        with self.lock:
            self.freed += size
            now = time.monotonic()
            if self.busy or self.freed < self.min_bytes:
                return
            self.busy = True  # one trim at a time; bytes let go meanwhile wait for the next
            delay = max(0.0, self.last + self.min_seconds - now)
        timer = threading.Timer(delay, self._run)
        timer.name, timer.daemon = "malloc-trim", True
        timer.start()

    def _run(self) -> None:
        with self.lock:
            self.freed, self.last = 0, time.monotonic()
        try:
            self.trim(0)
            self.trims += 1
        except Exception as exc:  # noqa: BLE001 - an optimisation: never fails ingest
            log.debug("malloc_trim failed: %s", exc)
        finally:
            with self.lock:
                self.busy = False


trimmer = Trimmer()
