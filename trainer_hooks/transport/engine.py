"""The sender thread: one asyncio loop that opens the outbox and runs the pump (`Sealer`:
call queue → outbox) and the connection (`Connection`: outbox → server) side by side.

The engine builds those parts on its thread, once the outbox is open, and hands each what it
works with; they never reach back into the engine or the client. It resolves what a pump pass
returns: syncs at once (after spilling every staged body), flushes once their messages have
left the outbox (`FlushWaiters`). It also decides when staged bodies reach the disk
(`spill_due`): after `spill_after` seconds unacknowledged, while the server is away, past
`max_staged_bytes`, on a sync and when the thread stops.
`kick`, `status` and `outbox_path` may be called from any thread.

While the loop is busy (from each wake-up in its selector until it waits for I/O again) the
interpreter's switch interval is lowered to `YIELD_SECONDS` (`Yielding`): a thread that asks
for the GIL meanwhile (the trainer, back from its kernels) gets it within that, instead of
waiting up to the default 5 ms while the sender converts, encodes and sends. While it waits,
and beside a trainer that holds the GIL in Python code, the process keeps its own interval.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import selectors
import sqlite3
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trainer_hooks.transport import outbox as outbox_files
from trainer_hooks.transport.batching import SampleBatcher
from trainer_hooks.transport.bookkeeping import Bookkeeping
from trainer_hooks.transport.connection import Connection
from trainer_hooks.transport.options import SenderOptions
from trainer_hooks.transport.outbox import Outbox
from trainer_hooks.transport.queue import CallQueue, FlushWaiters
from trainer_hooks.transport.resume import ResumeFilter
from trainer_hooks.transport.run import RunTarget
from trainer_hooks.transport.sealer import Sealer
from trainer_hooks.transport.spooled import Summary

log = logging.getLogger("trainer_hooks.sender")

# The switch interval while the sender's loop is busy: about the longest a trainer thread
# asking for the GIL then waits for the sender (bench/trainer_cost.py --lists: at the default
# 5 ms the loop was blocked ~100 µs a step on the GIL, at 0.1 ms ~45; bench/RESULTS.md,
# 2026-12-04).
YIELD_SECONDS = 0.0001
JUDGE_SECONDS = 0.01  # the busy time over which the sender judges whether to lower it


class Yielding:
    """The switch interval lowered to `YIELD_SECONDS` while the sender's loop is busy (from
    each wake-up until it waits for I/O again: `enter`, `leave`; `YieldingSelector`), so that
    a trainer thread back from its kernels gets the GIL within that instead of waiting up to
    the default 5 ms while the sender converts, encodes and sends.

    The lower interval applies to every thread waiting for the GIL, the sender's too: beside a
    trainer that holds the GIL in Python code, the sender would take it back every 0.1 ms
    instead of sharing it in 5 ms slices (more switches, and the sender's work done during
    the trainer's loop instead of beside it). So every `JUDGE_SECONDS` of busy time the loop
    judges its last spells (`judge`): blocked (neither on a CPU nor waiting for one: waiting
    for the GIL) longer than on a CPU, the next keep the process's interval; else they lower
    it. Any number of
    sender threads at once: the first to lower it saves the process's interval, the last to
    leave restores it, unless someone set another meanwhile."""

    lock = threading.Lock()
    depth = 0
    saved = ours = 0.0

    def __init__(self) -> None:
        self.entered = self.lowered = False
        self.low_next = True
        self.busy = 0.0  # seconds the loop was busy since the last judgement
        self.last: tuple[float, float] | None = None  # `schedstat` at the last judgement
        self.start = 0.0
        self.stat = -1  # this thread's /proc schedstat, opened on the first `enter`
        self.stat_fails = False

    def schedstat(self) -> tuple[float, float]:
        """This thread's seconds on a CPU and runnable but waiting for one (Linux); elsewhere
        its CPU time and 0 (waiting for a core then counts as waiting for the GIL)."""
        if self.stat < 0 and not self.stat_fails:
            try:
                self.stat = os.open("/proc/thread-self/schedstat", os.O_RDONLY)
            except OSError:
                self.stat_fails = True
        if self.stat >= 0:
            try:
                run, wait = os.pread(self.stat, 128, 0).split()[:2]
                return int(run) / 1e9, int(wait) / 1e9
            except (OSError, ValueError):
                pass
        return time.thread_time(), 0.0

    def enter(self) -> None:
        if self.entered:
            return
        self.entered = True
        if self.last is None:
            self.last = self.schedstat()
        self.start = time.monotonic()
        if not self.low_next:
            return
        cls = Yielding
        with cls.lock:
            if cls.depth == 0:
                cls.saved = sys.getswitchinterval()
                if cls.saved > YIELD_SECONDS:
                    sys.setswitchinterval(YIELD_SECONDS)
                cls.ours = sys.getswitchinterval()  # (as the interpreter rounds it)
            cls.depth += 1
        self.lowered = True

    def leave(self) -> None:
        if not self.entered:
            return
        self.entered = False
        if self.lowered:
            self.lowered = False
            cls = Yielding
            with cls.lock:
                cls.depth -= 1
                if cls.depth == 0 and sys.getswitchinterval() == cls.ours != cls.saved:
                    sys.setswitchinterval(cls.saved)  # (unless someone set another meanwhile)
        self.busy += time.monotonic() - self.start
        if self.busy >= JUDGE_SECONDS:
            self.judge()

    def judge(self) -> None:
        """Whether the next spells lower the interval, from the last ones: the loop's busy
        time since the last judgement against the thread's time on a CPU and waiting for one
        meanwhile (outside its busy spells the thread sleeps in the selector)."""
        stat = self.schedstat()
        if self.last is not None:  # (set on the first spell)
            run, runnable = stat[0] - self.last[0], stat[1] - self.last[1]
            self.low_next = self.busy - run - runnable <= run
        self.last, self.busy = stat, 0.0

    def close(self) -> None:
        self.leave()
        if self.stat >= 0:
            os.close(self.stat)
            self.stat = -1


class YieldingSelector(selectors.DefaultSelector):
    """The sender loop's selector: the process's switch interval while it waits for I/O, the
    lower one (`Yielding`) while the loop runs callbacks."""

    def __init__(self, yielding: Yielding) -> None:
        super().__init__()
        self.yielding = yielding

    def select(self, timeout: float | None = None) -> list[Any]:
        self.yielding.leave()
        try:
            return super().select(timeout)
        finally:
            self.yielding.enter()


class SenderEngine:
    """One client's sender thread (`run` is the thread's target)."""

    def __init__(self, target: RunTarget, options: SenderOptions, calls: CallQueue,
                 books: Bookkeeping, after_pump: Callable[[], None] | None = None) -> None:
        self.target = target
        self.after_pump = after_pump  # called after each pump pass (the sender process)
        self.options = options
        self.calls = calls
        self.books = books
        self.started = threading.Event()  # set once the outbox is open (or the thread failed)
        self.loop: asyncio.AbstractEventLoop | None = None
        self.kick_event: asyncio.Event | None = None
        self.outbox: Outbox | None = None
        self.connection: Connection | None = None
        self.waiters: FlushWaiters | None = None
        self.left: Summary | None = None  # what the outbox still held when the thread stopped
        # Set by close() before it stops the thread: remove the outbox's files when it is
        # left empty (the run ended finished, or a joined client: no resume needs them)
        self.discard_when_empty = False
        self.discarded = False
        self.owner: int | None = None  # whose messages the outbox holds (default: this process)

    # ---------------------------------------------------------------- any thread

    def kick(self) -> None:
        """Wake the pump now."""
        loop, event = self.loop, self.kick_event
        if loop is not None and event is not None:
            try:
                loop.call_soon_threadsafe(event.set)
            except RuntimeError:  # the loop is closed
                pass

    def status(self) -> dict[str, int]:
        """`pending` (outbox messages not yet acknowledged), `in_flight`, `spool_bytes` and
        `connected` (0/1), for `Client.stats`."""
        outbox, connection = self.outbox, self.connection
        return {"pending": outbox.rows if outbox else 0,
                "in_flight": len(connection.in_flight) if connection else 0,
                "spool_bytes": outbox.bytes if outbox else 0,
                "connected": int(connection.connected) if connection else 0}

    @property
    def outbox_path(self) -> Path | None:
        return self.outbox.path if self.outbox else None

    # ---------------------------------------------------------------- the sender thread

    def run(self) -> None:
        try:
            yielding = Yielding()
            try:
                with asyncio.Runner(loop_factory=lambda: asyncio.SelectorEventLoop(
                        YieldingSelector(yielding))) as runner:
                    runner.run(self.main())
            finally:
                yielding.close()
        except Exception:  # noqa: BLE001 - the thread must end quietly, the caller keeps going
            log.exception("telescope: the sender thread failed; nothing more will be sent")
        finally:
            self.started.set()
            if self.waiters is not None:
                self.waiters.resolve_all(False)

    async def main(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.kick_event = kick = asyncio.Event()
        new_messages = asyncio.Event()
        outbox = self.outbox = self.open_outbox()
        incarnation = self.take_incarnation(outbox)
        options, target, books = self.options, self.target, self.books
        books.count("replayed", outbox.rows)
        books.count("lost_unspooled", outbox.lost)
        books.count("unconfirmed_unspooled", outbox.in_doubt)
        if outbox.rows:
            log.info("telescope: replaying %d unacknowledged messages from %s", outbox.rows,
                     outbox.path)
        batcher = SampleBatcher(options.max_batch_samples, options.max_batch_bytes)
        resume = ResumeFilter(outbox, books, run=target.run, resume=target.resume,
                              keep_steps=options.dedupe_steps)
        sealer = Sealer(options, self.calls, outbox, batcher, resume, books, run=target.run,
                        incarnation=incarnation)
        waiters = self.waiters = FlushWaiters(outbox, books.losses)
        self.connection = Connection(target, options, outbox, waiters, books,
                                     new_messages=new_messages,
                                     cap_batch_bytes=batcher.cap_bytes,
                                     labels_as_lists=batcher.labels_as_lists)
        self.started.set()
        connecting = asyncio.create_task(self.connection.run())
        try:
            while True:
                try:
                    await asyncio.wait_for(kick.wait(), options.poll_interval)
                except TimeoutError:
                    pass
                kick.clear()
                pumped = sealer.pump_once()
                if self.after_pump is not None:
                    self.after_pump()
                if len(self.calls):
                    kick.set()  # more waiting: pump again at once ...
                    # ... after the connection's turn: a set event's wait() does not suspend
                    # (from Python 3.12, wait_for does not either), and the pass's messages
                    # must leave while the rest is sealed
                    await asyncio.sleep(0)
                if pumped.written:
                    new_messages.set()
                spilled = self.spill_due(outbox, everything=bool(pumped.syncs or pumped.stop))
                for waiter in pumped.syncs:  # (False: a body could not be written to disk)
                    waiter.resolve(pumped.stored and spilled)
                for waiter in pumped.flushes:
                    waiters.add(waiter)
                if pumped.flushes and self.connection.done_ids:
                    self.connection.commit_done()  # (acks waiting for their transaction)
                waiters.check()
                if pumped.stop:
                    return
        finally:
            connecting.cancel()
            await asyncio.gather(connecting, return_exceptions=True)
            if self.connection.done_ids:
                self.connection.commit_done()  # acknowledged: not replayed
            waiters.resolve_all(False)
            try:
                self.spill_due(outbox, everything=True)  # what was not acknowledged is replayed
                with contextlib.suppress(sqlite3.Error):  # (only close()'s report needs it)
                    self.left = outbox.summary()
            finally:
                left = self.left
                if self.discard_when_empty and left is not None and not left.total \
                        and not left.unwritten:
                    self.discarded = outbox.discard()
                else:
                    outbox.close()

    def spill_due(self, outbox: Outbox, *, everything: bool) -> bool:
        """Write the staged bodies that are due to disk: all of them with `everything`, past
        `max_staged_bytes` or while the server is away (not connected, the oldest staged for
        half a second), else those staged `spill_after` seconds. A failing file: the outbox
        carries on in memory, as when a write fails, and this returns False."""
        if not outbox.staging:
            return True
        oldest = outbox.oldest_staged()
        if oldest is None:
            return True
        o, now = self.options, time.monotonic()
        away = self.connection is None or not self.connection.connected
        try:
            if everything or outbox.staged_bytes > o.max_staged_bytes or (
                    away and now - oldest > min(o.spill_after, 0.5)):
                outbox.spill()
            elif now - oldest > o.spill_after:
                outbox.spill(now - o.spill_after)
        except (sqlite3.Error, OSError) as exc:
            self.books.count("spool_errors")
            outbox.move_to_memory(exc)
            return False
        return True

    def open_outbox(self) -> Outbox:
        """This client's slot of the run's outbox (adopting dead clients' messages), or an
        in-memory one with `spool=False` or when the file cannot be opened."""
        options = self.options
        try:
            if options.spool:
                base = Path(options.spool_dir) if options.spool_dir else \
                    outbox_files.default_dir()
                return outbox_files.open_slot(
                    base, self.target.run, name=options.spool_name, fsync=options.fsync,
                    scope=self.target.scope,
                    staged=options.spill_after > 0 and not options.fsync,
                    url=self.target.url, token=self.target.token, owner=self.owner)
            return Outbox(None)
        except (OSError, sqlite3.Error) as exc:
            log.warning("telescope: cannot open the outbox (%s); keeping messages in memory "
                        "only", exc)
            self.books.count("spool_errors")
            return Outbox(None)

    def take_incarnation(self, outbox: Outbox) -> str:
        """The run incarnation this client's messages carry: with `resume` the one the outbox
        sent for last, else a new one (remembered for a later resume)."""
        try:
            return outbox.take_incarnation(self.target.resume, uuid.uuid4().hex)
        except sqlite3.Error as exc:
            log.warning("telescope: cannot record the run incarnation (%s)", exc)
            outbox.incarnation = uuid.uuid4().hex
            return outbox.incarnation
