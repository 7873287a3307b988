"""The embedded database: Django's SQLite backend, with one write lock that the server's
threads and its pipeline worker process share.

SQLite lets one transaction write at a time (the server's transactions BEGIN IMMEDIATE). A
connection that finds the database busy waits in SQLite's busy handler, which sleeps 1, 2, 5,
10, 15, 20, 25, … ms between tries, so a writer is not woken when the lock is free but when its
next sleep ends. While a trainer streams, the ingest writer, the worker writing aggregates and
the pipeline's own thread contend all the time: measured with strace during one run of
bench/vs_trackio.py (2.7 s), each of those three threads slept 0.9–1.3 s in the handler.

So the server takes its own lock first (a `multiprocessing` lock: a futex, whose waiter is
woken as soon as it is released) around every transaction of its connections; SQLite then
finds the database free. Waiting is bounded by WAIT_SECONDS; past that the transaction begins
anyway and SQLite's own locking decides (its busy timeout, 30 s), as it does for a process
that does not share the lock (a `manage.py` command run beside the server). A worker process
that dies holding the lock never releases it: the server installs a new one for the worker it
starts next (ingest.pipeline.materialize). Without `install()` (tests, management commands)
this backend is Django's.
"""

from __future__ import annotations

import multiprocessing
from typing import Any

from django.db.backends.sqlite3 import base

WAIT_SECONDS = 5.0  # a transaction of the server takes milliseconds; seconds: something is stuck

_LOCK: Any = None  # the process's shared write lock, once installed


def install(lock: Any = None) -> Any:
    """Use `lock` (the server's, handed to a worker process) or a new one in this process;
    returns it, for the worker processes to be given."""
    global _LOCK
    _LOCK = lock if lock is not None else multiprocessing.get_context("spawn").Lock()
    return _LOCK


class DatabaseWrapper(base.DatabaseWrapper):
    _held: Any = None  # the lock this connection's open transaction holds

    # For code that knows connections, not this module (ingest.pipeline hands the lock to its
    # worker process): the process's lock, and installing one.
    @property
    def shared_write_lock(self) -> Any:
        return _LOCK

    @staticmethod
    def install_write_lock(lock: Any = None) -> Any:
        return install(lock)

    def _start_transaction_under_autocommit(self) -> None:
        lock = _LOCK
        if lock is not None and self._held is None and lock.acquire(timeout=WAIT_SECONDS):
            self._held = lock
        try:
            super()._start_transaction_under_autocommit()  # type: ignore[misc]  # (not in django-stubs)
        except BaseException:
            self._release()
            raise

    def _commit(self) -> None:
        super()._commit()  # type: ignore[misc]  # (a failed COMMIT: Django rolls back)
        self._release()

    def _rollback(self) -> None:
        try:
            super()._rollback()  # type: ignore[misc]  # (not in django-stubs)
        finally:
            self._release()

    def _close(self) -> None:
        try:
            super()._close()  # type: ignore[misc]  # (not in django-stubs)
        finally:
            self._release()

    def _release(self) -> None:
        held, self._held = self._held, None
        if held is not None:
            held.release()
