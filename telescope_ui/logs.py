"""Logging of the server process (LOGGING in telescope_ui.settings).

`RedisOutage`: while the channel layer's Redis is unreachable, channels_redis logs a traceback
every second (its receive loop retries) and another for every page that leaves. Ingest does not
depend on Redis (the database is the source of truth, ingest.core.broadcast) and pages fall back to
reading the database (telescope_ui.live): one line every EVERY seconds says so instead.
"""

from __future__ import annotations

import logging
import time

EVERY = 30.0


class RedisOutage(logging.Filter):
    def __init__(self) -> None:
        super().__init__()
        self.last = -EVERY

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.exc_info:
            return True
        now = time.monotonic()
        if now - self.last < EVERY:
            return False
        self.last = now
        exc = record.exc_info[1]
        record.msg = ("live updates: the channel layer cannot reach Redis (%s: %s); ingest goes "
                      "on, pages read the database until it is back (this is logged at most "
                      "every %.0f s)")
        record.args = (type(exc).__name__, exc, EVERY)
        record.exc_info = record.exc_text = None
        record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True
