"""Whether this server process can write, for `/healthz` (docs/operations.md "Health").

A probe write (`probe`) catches a database that refuses writes outright; but a full disk under
SQLite may still take a small write into space the write-ahead log already holds, so what the
ingest path met is kept too: the last storage failure of this process stands (`/healthz` 503
with its reason) until an ingest write succeeds again.
"""

from __future__ import annotations

import threading
import time

from django.db import connection, transaction

_lock = threading.Lock()
_failure: tuple[float, str] | None = None  # (when, why) of the last failed ingest write


def ingest_failed(exc: BaseException) -> None:
    """An ingest write failed for a reason of the storage (not of the message)."""
    global _failure
    with _lock:
        _failure = (time.time(), f"{type(exc).__name__}: {exc}".strip()[:300])


def ingest_succeeded() -> None:
    global _failure
    if _failure is not None:
        with _lock:
            _failure = None


def last_failure() -> str | None:
    """Why the latest ingest write of this process failed, if none succeeded since."""
    failure = _failure
    if failure is None:
        return None
    when, why = failure
    return f"ingest writes failing since {time.strftime('%H:%M:%S', time.gmtime(when))} UTC: {why}"


def probe() -> None:
    """Write and commit one row (raises the database's error when it cannot)."""
    with transaction.atomic(), connection.cursor() as cur:
        cur.execute("INSERT INTO ingest_healthprobe (id, at) VALUES (1, %s)"
                    " ON CONFLICT (id) DO UPDATE SET at = excluded.at", [time.time()])
