"""`WarnOnce`: a log message the first time its key is seen, for the problems a training job
must hear about once and not on every call (a bad metric key, a failing reward function).
Every part of trainer_hooks that warns once uses it; what it counts, each caller counts itself.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Hashable
from typing import Any


class WarnOnce:
    """Logs to `logger` the first time each key is seen. Safe from any thread: two threads
    meeting a key at once log it once."""

    def __init__(self, logger: logging.Logger) -> None:
        self._log = logger
        self._lock = threading.Lock()
        self._seen: set[Hashable] = set()

    def __call__(self, key: Hashable, msg: str, *args: Any, level: int = logging.WARNING
                 ) -> bool:
        """Log `msg % args` at `level` unless `key` was seen before; True when it logged."""
        with self._lock:
            if key in self._seen:
                return False
            self._seen.add(key)
        self._log.log(level, msg, *args)
        return True
