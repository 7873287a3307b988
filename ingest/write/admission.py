"""What one token may make the server do (docs/operations.md "Limits").

- **Rates.** A token bucket per connection (TELESCOPE_MAX_MESSAGES_PER_SECOND, burst
  TELESCOPE_RATE_BURST) and one per token, shared by all its connections and its HTTP requests
  (TELESCOPE_TOKEN_MESSAGES_PER_SECOND, burst TELESCOPE_TOKEN_RATE_BURST); a frame or an HTTP
  body costs one. Over either: close 4429 / HTTP 429.
- **Backlog.** Frames a connection has received but not yet applied are bounded by count
  (INBOX_FRAMES) and by bytes, per token across its connections (TELESCOPE_TOKEN_BACKLOG_BYTES).
  The WebSocket layer under daphne reads a socket eagerly into a queue of its own, so stopping
  to read is not available to the consumer: a connection whose frames would pass a bound is
  closed with 4429 at once instead, and the server never holds more than that bound per token
  (plus the frame being read on each connection).
- **Fair turns.** Every ingest write of every connection and HTTP request runs on one writer
  thread (writes of one database serialize anyway), taken in turns by token (`FairExecutor`):
  a token with many busy connections cannot make another token's frames wait behind all of
  them — at most behind one job of each other token with work waiting.
- **Memory.** A closed connection's frames are dropped at once (ingest.write.consumers), and the
  memory frames held goes back to the system after a burst (ingest.write.memory).
"""

from __future__ import annotations

import collections
import functools
import threading
import time
from concurrent.futures import Executor, Future
from typing import Any

from django.conf import settings

from ingest.write import memory

INBOX_FRAMES = 128  # frames received and not yet applied, per connection


class TokenBucket:
    """Messages per second with a burst allowance (thread-safe: HTTP and WebSocket share)."""

    def __init__(self, rate: float, burst: float) -> None:
        self.rate, self.capacity, self.tokens = rate, burst, burst
        self.stamp = time.monotonic()
        self.lock = threading.Lock()

    def take(self) -> bool:
        with self.lock:
            now = time.monotonic()
            self.tokens = min(self.capacity, self.tokens + (now - self.stamp) * self.rate)
            self.stamp = now
            if self.tokens < 1:
                return False
            self.tokens -= 1
            return True


class TokenState:
    """One token's shared budget in this process: its bucket and its unapplied bytes."""

    def __init__(self) -> None:
        self.bucket = TokenBucket(settings.TELESCOPE_TOKEN_MESSAGES_PER_SECOND,
                                  settings.TELESCOPE_TOKEN_RATE_BURST)
        self.backlog_bytes = 0
        self.lock = threading.Lock()

    def hold(self, size: int) -> bool:
        """Count `size` more unapplied bytes, unless that passes the token's bound."""
        with self.lock:
            if self.backlog_bytes + size > settings.TELESCOPE_TOKEN_BACKLOG_BYTES:
                return False
            self.backlog_bytes += size
            return True

    def release(self, size: int) -> None:
        """`size` bytes of frames were applied or dropped."""
        with self.lock:
            self.backlog_bytes = max(0, self.backlog_bytes - size)
        memory.trimmer.let_go(size)  # the memory they held goes back to the system


_tokens: dict[str, TokenState] = {}
_tokens_lock = threading.Lock()


def token_state(key: str) -> TokenState:
    """The shared state of the token with digest `key`."""
    with _tokens_lock:
        state = _tokens.get(key)
        if state is None:
            state = _tokens[key] = TokenState()
        return state


class FairExecutor(Executor):
    """One worker thread taking jobs in turns by key: a queue per key, the keys with work
    waiting served round-robin, one job each. `lane(key)` is an Executor that submits to it
    under `key` (for `database_sync_to_async(..., executor=...)`); plain `submit` uses the
    key None."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.lanes: collections.OrderedDict[Any, collections.deque[tuple[Any, ...]]] = \
            collections.OrderedDict()
        self.ready = threading.Condition()
        self.thread: threading.Thread | None = None

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Future[Any]:
        return self.submit_to(None, fn, *args, **kwargs)

    def submit_to(self, key: Any, fn: Any, /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        with self.ready:
            self.lanes.setdefault(key, collections.deque()).append((future, fn, args, kwargs))
            if self.thread is None:
                self.thread = threading.Thread(target=self._work, daemon=True, name=self.name)
                self.thread.start()
            self.ready.notify()
        return future

    def lane(self, key: Any) -> Executor:
        return _Lane(self, key)

    def _next(self) -> tuple[Any, ...]:
        with self.ready:
            while not self.lanes:
                self.ready.wait()
            key, queue = self.lanes.popitem(last=False)
            job = queue.popleft()
            if queue:
                self.lanes[key] = queue  # to the back of the round
            return job

    def _work(self) -> None:
        while True:
            future, fn, args, kwargs = self._next()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn(*args, **kwargs))
            except BaseException as exc:  # noqa: BLE001 - handed to the waiting caller
                future.set_exception(exc)


class _Lane(Executor):
    def __init__(self, fair: FairExecutor, key: Any) -> None:
        self.fair, self.key = fair, key

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Future[Any]:
        return self.fair.submit_to(self.key, fn, *args, **kwargs)


@functools.cache
def ingest_executor() -> FairExecutor:
    """The thread that applies ingest writes (with its own database connection), apart from
    the one Django and Channels share for everything else — page reads, live replays — so
    neither waits behind the other; one, since writes of one database serialize anyway
    (SQLite has one writer; PostgreSQL scales out by processes)."""
    return FairExecutor("ingest")
