"""The sender thread: one asyncio loop running the pump (`Sealer`: caller's queue → outbox)
and the connection (`Connection`: outbox → server), and the state both share — the outbox,
the counters, the flush waiters and the fatal-refusal flag.

Everything here runs on that thread, except `kick` and reading `counts` (plain ints, read
without a lock by `Client.stats`).
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import threading
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainer_hooks import spool as spool_mod
from trainer_hooks.batching import SampleBatcher
from trainer_hooks.connection import Connection
from trainer_hooks.sealing import Sealer
from trainer_hooks.sender_queue import LOSSES, STAT_NAMES, Waiter

if TYPE_CHECKING:
    from trainer_hooks.sender import Client

log = logging.getLogger("trainer_hooks.sender")


class SenderEngine:
    """The state and lifecycle of one client's sender thread (`run` is the thread's target)."""

    def __init__(self, client: Client, token: str) -> None:
        self.c = client
        self.o = o = client.options
        self.token = token
        self.started = threading.Event()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.counts = dict.fromkeys(STAT_NAMES, 0)
        self.batcher = SampleBatcher(o.max_batch_samples, o.max_batch_bytes)
        self.spool: spool_mod.Spool | None = None
        self.fatal: str | None = None
        self.flush_waiters: list[Waiter] = []
        self.losses_seen = 0
        self.warned: set[Any] = set()
        self.incarnation = ""
        self.sealer = Sealer(self)
        self.connection = Connection(self)

    # ---------------------------------------------------------------- lifecycle

    def run(self) -> None:
        try:
            with asyncio.Runner() as runner:
                runner.run(self.main())
        except Exception:  # noqa: BLE001 - the thread must end quietly, the caller keeps going
            log.exception("telescope: the sender thread failed; nothing more will be sent")
        finally:
            self.started.set()
            self.resolve_all(False)

    async def main(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.kick_event = asyncio.Event()
        self.send_event = asyncio.Event()
        self.open_spool()
        self.started.set()
        conn = asyncio.create_task(self.connection.run())
        try:
            await self.pump_loop()
        finally:
            conn.cancel()
            await asyncio.gather(conn, return_exceptions=True)
            self.resolve_all(False)
            if self.spool is not None:
                self.spool.close()

    async def pump_loop(self) -> None:
        while True:
            try:
                await asyncio.wait_for(self.kick_event.wait(), self.o.poll_interval)
            except TimeoutError:
                pass
            self.kick_event.clear()
            if self.sealer.pump_once():
                return

    def kick(self) -> None:
        """Wake the pump now (any thread)."""
        loop = self.loop
        if loop is not None:
            try:
                loop.call_soon_threadsafe(self.kick_event.set)
            except RuntimeError:  # the loop is closed
                pass

    def open_spool(self) -> None:
        o = self.o
        try:
            if o.spool:
                base = Path(o.spool_dir) if o.spool_dir else spool_mod.default_dir()
                self.spool = spool_mod.open_slot(base, self.c.run, name=o.spool_name,
                                                 fsync=o.fsync, scope=self.c.scope)
            else:
                self.spool = spool_mod.Spool(None)
        except (OSError, sqlite3.Error) as exc:
            log.warning("telescope: cannot open the outbox (%s); keeping messages in memory "
                        "only", exc)
            self.counts["spool_errors"] += 1
            self.spool = spool_mod.Spool(None)
        try:
            self.incarnation = self.spool.take_incarnation(self.c.resume, uuid.uuid4().hex)
        except sqlite3.Error as exc:
            log.warning("telescope: cannot record the run incarnation (%s)", exc)
            self.incarnation = self.spool.incarnation = uuid.uuid4().hex
        self.counts["replayed"] = self.sealer.since_barrier = self.spool.rows
        if self.spool.rows:
            log.info("telescope: replaying %d unacknowledged messages from %s",
                     self.spool.rows, self.spool.path)

    def warn_once(self, key: Any, msg: str, *args: Any, level: int = logging.WARNING) -> None:
        if key not in self.warned:
            self.warned.add(key)
            log.log(level, msg, *args)

    def run_opened(self, reply: dict[str, Any]) -> None:
        """The server's answer to our run.start: which run this client's messages reach."""
        c = self.c
        c.run_id, c.run_name = reply.get("run_id"), reply.get("run_name")
        if reply.get("new_run"):
            log.warning("telescope: run %r already holds an earlier experiment on %s; this one "
                        "is stored as the new run %r (id %s). To continue the earlier run "
                        "instead, connect with resume=True.", c.run, c.url, c.run_name,
                        c.run_id)
        elif reply.get("duplicate") is None and c.run_name not in (None, c.run):
            log.info("telescope: run %r is shown as %r (id %s)", c.run, c.run_name, c.run_id)

    def set_fatal(self, reason: str) -> None:
        """Stop sending for good (a refused token, a bad URL); the outbox is kept."""
        self.fatal = reason
        log.error("telescope: %s; nothing more will be sent to %s. Messages stay in the "
                  "outbox %s and are replayed by a later client of this run with the same "
                  "token once the server accepts it.",
                  reason, self.c.url, self.spool.path if self.spool else None)
        self.resolve_all(False)

    # ---------------------------------------------------------------- waiters

    def losses(self) -> int:
        c = self.c._counts
        return sum(self.counts[k] + c.get(k, 0) for k in LOSSES)

    def check_waiters(self) -> None:
        """Resolve the flushes whose messages have all left the outbox."""
        if not self.flush_waiters or self.spool is None:
            return
        if self.fatal is not None:
            self.resolve_all(False)
            return
        low = self.spool.min_seq()
        done = [w for w in self.flush_waiters if low is None or low > w.target]
        if done:
            lost = self.losses()
            ok, self.losses_seen = lost == self.losses_seen, lost
            self.flush_waiters = [w for w in self.flush_waiters if w not in done]
            for w in done:
                w.resolve(ok)

    def resolve_all(self, ok: bool) -> None:
        waiters, self.flush_waiters = self.flush_waiters, []
        for w in waiters:
            w.resolve(ok)

