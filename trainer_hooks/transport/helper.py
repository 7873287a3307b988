"""The sender process (`connect(..., sender="process")`): batching, validation, encoding, the
outbox and the WebSocket in a child process, so that the trainer's GIL pays only for handing
each log call over (`transport.handoff`: one copy into shared memory, no system call).

**Trainer side** (`ProcessSender`): stands in the client for the sender thread's engine, its
thread and its call queue (`kick`, `status`, `started`, `left`, `discard_when_empty`,
`is_alive`, `join`, `append`). It starts the helper (`python -c` of this module's `serve`,
with the trainer's `sys.path`; the run target and options go through its stdin, never its
command line), writes each queued call into the ring, turns `flush()` / `sync()` / `stats`
into requests answered on the reply pipe, and re-logs the helper's log records through the
trainer's own loggers. Counters and the ledger of values not stored come back with every
reply (`RemoteBooks`).

**Helper side** (`serve`): the same `SenderEngine` the sender thread runs (sealer, outbox,
connection) on a thread of its own; a feeder thread decodes the records into the engine's
call queue. It ignores SIGINT and SIGTERM (a Ctrl-C or a job scheduler signals the whole
process group: the trainer decides, its `close()` or exit hooks end the run) and stops when
asked, or when the trainer is gone (its pipe at end of file, or it is no longer the parent):
then every staged body is written to the outbox file and the helper exits, leaving what the
server has not acknowledged for a resume or `telescope sync` — nothing handed over is lost
with the trainer.

**Durability.** A log call has returned once its record is in the ring: from then on it
survives the trainer being killed (the helper seals it and spills it to disk); `sync()`
returns once everything is in the outbox on disk, as with the thread. If the helper dies the
trainer notices at once (its reply pipe closes): pending `flush()` / `sync()` calls return
False, a new helper is started (at most MAX_RESTARTS times) which replays the outbox and
reads the ring on from where the dead one stopped, and what the dead one had read but not
sealed (`queued − sealed` in the ring's header), and the bodies it had not spilled (its
outbox says how many when reopened: `lost_unspooled`), are counted as lost
(`lost_sender_died`, named in `not_stored`): a flush reports it.
"""

from __future__ import annotations

import itertools
import logging
import os
import pickle
import signal
import struct
import subprocess
import sys
import threading
import time
from dataclasses import asdict
from pathlib import Path
from typing import IO, Any, NamedTuple

from trainer_hooks.transport.bookkeeping import Bookkeeping, Ledger
from trainer_hooks.transport.engine import SenderEngine
from trainer_hooks.transport.handoff import RING_BYTES, Reader, Writer, decode, make_ring, widen
from trainer_hooks.transport.options import SenderOptions
from trainer_hooks.transport.queue import (
    Call,
    CallQueue,
    FlushCall,
    StopCall,
    SyncCall,
    Waiter,
)
from trainer_hooks.transport.run import RunTarget
from trainer_hooks.transport.spooled import Summary

log = logging.getLogger("trainer_hooks.sender")

MAX_RESTARTS = 3
STATUS_TIMEOUT = 5.0  # seconds `stats` waits for the helper's answer (then: the last one)
START_TIMEOUT = 60.0
_U32 = struct.Struct("<I")
_BOOT = ("import pickle, sys; s = pickle.load(sys.stdin.buffer); sys.path[:] = s['path']; "
         "from trainer_hooks.transport.helper import serve; serve(s)")


class Request(NamedTuple):
    """A request to the helper: `flush` / `sync` (answered when resolved), `status`
    (answered at once) or `stop` (`arg`: discard the outbox when it is left empty)."""

    kind: str
    id: int
    arg: Any = None


# ---------------------------------------------------------------- trainer side


class RemoteLedger(Ledger):
    """The ledger of values not stored: this process's entries and the helper's."""

    def __init__(self) -> None:
        super().__init__()
        self.remote_total = 0
        self.remote_entries: list[dict[str, Any]] = []

    @property
    def total(self) -> int:
        return self.local_total + self.remote_total

    @total.setter
    def total(self, value: int) -> None:
        self.local_total = value

    def add(self, reason: str, what: str, count: int = 1, why: str = "") -> None:
        with self._lock:
            self.entries.append({"reason": reason, "what": what, "count": count, "why": why})
            self.local_total += count

    def snapshot(self) -> list[dict[str, Any]]:
        merged = self.remote_entries + super().snapshot()
        return [dict(e) for e in merged[-(self.entries.maxlen or 1000):]]


class RemoteBooks(Bookkeeping):
    """Counters of this process (the log calls' side) plus those of the helper(s): the
    current one's latest snapshot and every dead one's last."""

    def __init__(self, logger: logging.Logger) -> None:
        super().__init__(logger)
        self.ledger: RemoteLedger = RemoteLedger()
        self.remote: dict[str, int] = {}
        self.dead: dict[str, int] = {}

    def __getitem__(self, name: str) -> int:
        return self.counts()[name]

    def counts(self) -> dict[str, int]:
        local = super().counts()
        return {k: v + self.remote.get(k, 0) + self.dead.get(k, 0) for k, v in local.items()}

    def local_losses(self) -> int:
        return super().losses()


class ProcessSender:
    """The trainer's side of the sender process (see the module docstring)."""

    def __init__(self, target: RunTarget, options: SenderOptions, books: RemoteBooks,
                 ring_bytes: int = RING_BYTES) -> None:
        self.target, self.options, self.books = target, options, books
        self.max_size = options.max_queue  # (the client's queue bound: the ring has its own)
        self.room = threading.Event()
        self.started = threading.Event()
        self.discard_when_empty = False
        self.discarded = False
        self.left: Summary | None = None
        self._outbox_path: Path | None = None
        self.pid: int | None = None
        self.cpu = 0.0
        self.ring_bytes = ring_bytes
        self.ring_fd = make_ring(ring_bytes)
        self.writer = Writer(self.ring_fd, ring_bytes)
        self.ids = itertools.count(1)
        self.waiting: dict[int, tuple[str, Waiter]] = {}
        self.lock = threading.Lock()
        self.status_now: dict[str, int] = {"pending": 0, "in_flight": 0, "spool_bytes": 0,
                                           "connected": 0}
        self.local_losses_seen = 0
        self.restarts = 0
        self.stopping = False  # stop requested: the helper's end is expected
        self.stopped = threading.Event()  # the helper has ended (for good)
        self.gone = False  # no helper any more: calls cannot be handed over
        self.proc: subprocess.Popen[bytes] | None = None
        self.spawn()

    # ------------------------------------------------------------ the helper's life

    def spawn(self) -> None:
        bell_r, bell_w = os.pipe()
        bulk_r, bulk_w = os.pipe()
        reply_r, reply_w = os.pipe()
        widen(bulk_w)
        consumed = self.writer.consumed()
        setup = {"path": list(sys.path), "target": self.target, "options": self.options,
                 "ring_fd": self.ring_fd, "bell_fd": bell_r, "bulk_fd": bulk_r,
                 "reply_fd": reply_w, "start": consumed, "ring_bytes": self.ring_bytes,
                 "parent": os.getpid(),
                 "log_level": min(logging.INFO, logging.getLogger("trainer_hooks")
                                  .getEffectiveLevel())}
        try:
            proc = subprocess.Popen([sys.executable, "-c", _BOOT], stdin=subprocess.PIPE,
                                    pass_fds=(self.ring_fd, bell_r, bulk_r, reply_w))
        finally:
            for fd in (bell_r, bulk_r, reply_w):
                os.close(fd)
        assert proc.stdin is not None
        proc.stdin.write(pickle.dumps(setup))
        proc.stdin.close()
        self.proc, self.pid = proc, proc.pid
        self.writer.attach(bell_w, bulk_w)
        threading.Thread(target=self.replies, args=(reply_r, proc, (bell_w, bulk_w)),
                         daemon=True, name=f"telescope-replies[{self.target.run}]").start()

    def replies(self, fd: int, proc: subprocess.Popen[bytes], pipes: tuple[int, int]
                ) -> None:
        """Answers of one helper, until it ends; then its end is handled."""
        with os.fdopen(fd, "rb") as pipe:
            while True:
                head = pipe.read(4)
                if len(head) < 4:
                    break
                data = pipe.read(_U32.unpack(head)[0])
                try:
                    self.on_reply(pickle.loads(data))
                except Exception:  # noqa: BLE001 - a bad answer must not stop the others
                    log.exception("telescope: bad answer from the sender process")
        code = proc.wait()
        del pipes  # (closed when a successor is attached, or at join: never reused meanwhile)
        self.on_end(code)

    def on_reply(self, reply: tuple[Any, ...]) -> None:
        kind = reply[0]
        if kind == "log":
            _, name, level, text = reply
            logging.getLogger(name).log(level, "%s", text)
            return
        self.absorb(reply[-1])
        if kind == "ready":
            self.started.set()
        elif kind == "done":
            _, rid, ok, _snap = reply
            with self.lock:
                entry = self.waiting.pop(rid, None)
            if entry is not None:
                what, waiter = entry
                if what == "flush":
                    lost = self.books.local_losses()
                    ok = ok and lost == self.local_losses_seen
                    self.local_losses_seen = lost
                waiter.resolve(ok)
        elif kind == "stopped":
            _, left, discarded, _snap = reply
            self.left = None if left is None else Summary(**left)
            self.discarded = discarded

    def absorb(self, snap: dict[str, Any]) -> None:
        """A helper's snapshot: its counters, status, ledger and what the server said."""
        self.books.remote = snap["counts"]
        self.status_now = snap["status"]
        ledger = self.books.ledger
        ledger.remote_total = snap["ledger_total"]
        if snap.get("ledger") is not None:
            ledger.remote_entries = snap["ledger"]
        self.target.run_id = snap["run_id"]
        self.target.run_name = snap["run_name"]
        self._outbox_path = None if snap["outbox"] is None else Path(snap["outbox"])
        self.cpu = snap["cpu"]  # the helper's CPU seconds so far (bench/trainer_cost.py)

    def on_end(self, code: int) -> None:
        """The helper ended: as asked (close), or it died — then count what it lost and start
        another, unless it died too often."""
        self.resolve_all(False)
        if self.stopping:
            self.gone = True
            self.stopped.set()
            self.room.set()
            return
        consumed, queued, sealed = self.writer.counters()
        lost = max(0, queued - sealed)
        books = self.books
        books.dead = {k: books.dead.get(k, 0) + v for k, v in books.remote.items()}
        books.remote = {}
        ledger = books.ledger
        ledger.remote_total = 0
        for entry in ledger.remote_entries:
            ledger.add(entry["reason"], entry["what"], entry["count"], entry["why"])
        ledger.remote_entries = []
        why = f"the sender process {self.pid} ended (exit status {code})"
        if lost:
            books.count("lost_sender_died", lost)
            ledger.add("sender process died", f"{lost} log calls it had not sealed", lost, why)
        if self.restarts >= MAX_RESTARTS:
            log.error("telescope: %s; %d restarts already: nothing more will be sent", why,
                      self.restarts)
            self.gone = True
            self.stopped.set()
            self.room.set()
            return
        self.restarts += 1
        books.count("sender_restarts")
        log.warning("telescope: %s; %d log calls it had not sealed are lost (counted in "
                    "stats['lost_sender_died']); starting another, which replays the outbox",
                    why, lost)
        self.started.clear()
        try:
            self.spawn()
        except OSError as exc:
            log.error("telescope: cannot start the sender process again: %s", exc)
            self.gone = True
            self.stopped.set()
            return
        self.started.wait(START_TIMEOUT)

    def resolve_all(self, ok: bool) -> None:
        with self.lock:
            waiting, self.waiting = self.waiting, {}
        for _, waiter in waiting.values():
            waiter.resolve(ok)

    # ------------------------------------------------------------ the client's calls

    def __len__(self) -> int:
        return 0  # (the ring bounds itself: `append` waits for room)

    def has_room(self) -> bool:
        return True

    def append(self, call: Call) -> None:
        """Hand one call over (the client's queue's `append`)."""
        kind = type(call)
        if kind is FlushCall or kind is SyncCall:
            what = "flush" if kind is FlushCall else "sync"
            self.request(what, call.waiter)  # type: ignore[union-attr]
            return
        if kind is StopCall:
            self.stopping = True
            self.send(Request("stop", 0, self.discard_when_empty))
            return
        self.send(call)

    def request(self, what: str, waiter: Waiter) -> None:
        rid = next(self.ids)
        with self.lock:
            self.waiting[rid] = (what, waiter)
        if not self.send(Request(what, rid)):
            with self.lock:
                self.waiting.pop(rid, None)
            waiter.resolve(False)

    def send(self, item: Any) -> bool:
        """Write one record; False (counted) when no helper will read it."""
        if self.gone:
            self.books.count("dropped_queue_full")
            self.books.ledger.add("sender stopped", type(item).__name__, 1,
                                  "the sender process has stopped")
            return False
        try:
            self.writer.put(item, self.wait_for_room, urgent=type(item) is Request)
        except OSError:  # (BrokenPipeError: a dead helper's successor reads it from the ring)
            return not self.gone
        return True

    def wait_for_room(self) -> bool:
        """The ring is full: wait a little for the helper (back-pressure, as `max_queue`)."""
        if self.gone:
            return False
        self.books.count("waited_queue_full")
        self.books.warn_once("queue", "telescope: logging faster than the sender process "
                             "seals; log calls wait for it (counted in "
                             "stats['waited_queue_full'])")
        time.sleep(0.001)
        return True

    def kick(self) -> None:
        """(The helper reads every record as it comes: nothing to wake.)"""

    def status(self) -> dict[str, int]:
        """The helper's status, asked now (at most STATUS_TIMEOUT; else the last known)."""
        if self.ready():
            waiter = Waiter()
            self.request("status", waiter)
            waiter.wait(STATUS_TIMEOUT)
        return dict(self.status_now)

    def ready(self) -> bool:
        """Wait (at most START_TIMEOUT) until the helper has opened its outbox: `connect`
        returns without waiting for it (its start, ~0.5 s, overlaps the trainer's); what only
        the helper knows waits here. False when there is no helper."""
        return not self.gone and (self.started.is_set() or self.started.wait(START_TIMEOUT))

    @property
    def outbox_path(self) -> Path | None:
        """The helper's outbox file (None: in memory, or no helper)."""
        if not self.stopped.is_set():
            self.ready()
        return self._outbox_path

    def is_alive(self) -> bool:
        return not self.gone

    def join(self, timeout: float | None = None) -> None:
        """Wait for the helper to end after `stop`."""
        self.stopped.wait(timeout)
        if self.stopped.is_set() and self.ring_fd >= 0:
            self.writer.attach(-1, -1)
            self.writer.close()
            os.close(self.ring_fd)
            self.ring_fd = -1


# ---------------------------------------------------------------- helper side


class _CountingQueue(CallQueue):
    """The engine's call queue, counting the calls it took (the ring header's `sealed`)."""

    def __init__(self, max_size: int) -> None:
        super().__init__(max_size)
        self.taken = 0

    def take(self, limit: int) -> list[Call]:
        taken = super().take(limit)
        self.taken += len(taken)
        return taken


class _Replies:
    """The helper's answers to the trainer: length-prefixed pickles (any thread)."""

    def __init__(self, fd: int) -> None:
        self.pipe: IO[bytes] = os.fdopen(fd, "wb")
        self.lock = threading.Lock()
        self.open = True

    def send(self, *reply: Any) -> None:
        data = pickle.dumps(reply)
        with self.lock:
            if not self.open:
                return
            try:
                self.pipe.write(_U32.pack(len(data)) + data)
                self.pipe.flush()
            except (BrokenPipeError, OSError):
                self.open = False  # the trainer is gone


class _Forward(logging.Handler):
    """The helper's log records, re-logged by the trainer through its own loggers."""

    def __init__(self, replies: _Replies) -> None:
        super().__init__()
        self.replies = replies

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if record.exc_info:
            text += "\n" + logging.Formatter().formatException(record.exc_info)
        self.replies.send("log", record.name, record.levelno, text)


class _RemoteWaiter(Waiter):
    __slots__ = ("answer",)

    def __init__(self, answer: Any) -> None:
        super().__init__()
        self.answer = answer

    def resolve(self, ok: bool) -> None:
        super().resolve(ok)
        self.answer(ok)


def serve(setup: dict[str, Any]) -> None:
    """The helper process's main (see the module docstring)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if hasattr(signal, "SIGXFSZ"):  # a file size limit: the outbox's write fails, and it
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # carries on in memory (not killed)
    replies = _Replies(setup["reply_fd"])
    root = logging.getLogger("trainer_hooks")
    root.addHandler(_Forward(replies))
    root.setLevel(setup["log_level"])
    root.propagate = False
    options: SenderOptions = setup["options"]
    target: RunTarget = setup["target"]
    books = Bookkeeping(log)
    calls = _CountingQueue(options.max_queue)
    reader = Reader(setup["ring_fd"], setup["bell_fd"], setup["bulk_fd"], setup["start"],
                    setup["ring_bytes"], min(options.poll_interval, 0.05))

    def sealed() -> None:
        reader.sealed = calls.taken
        reader.publish()

    engine = SenderEngine(target, options, calls, books, after_pump=sealed)
    engine.owner = setup["parent"]  # (its slot, held after the trainer's death, is waited for)
    seen = [-1]

    def snapshot() -> dict[str, Any]:
        total = books.ledger.total
        changed = total != seen[0]
        seen[0] = total
        return {"counts": books.counts(), "status": engine.status(),
                "ledger_total": total, "ledger": books.ledger.snapshot() if changed else None,
                "run_id": target.run_id, "run_name": target.run_name,
                "outbox": None if engine.outbox_path is None else str(engine.outbox_path),
                "cpu": time.process_time()}

    thread = threading.Thread(target=engine.run, name="telescope-sender", daemon=True)
    thread.start()
    engine.started.wait(START_TIMEOUT)
    replies.send("ready", snapshot())
    stop = threading.Event()  # the trainer asked to stop, or is gone
    asked = threading.Event()

    def feed() -> None:
        for record in reader.records():
            try:
                item: Any = decode(record)
            except Exception as exc:  # noqa: BLE001 - one bad record must not stop the rest
                books.count("invalid_calls")
                books.ledger.add("invalid call", "a log call", 1,
                                 f"could not be read by the sender process: {exc}")
                reader.publish()
                continue
            if type(item) is Request:
                handle(item)
            else:
                put(item)
            reader.publish()
        stop.set()  # the trainer is gone (or done)

    def put(call: Call) -> None:
        while not calls.has_room() and thread.is_alive():
            calls.room.clear()
            if not calls.has_room():
                engine.kick()
                calls.room.wait(0.05)
        calls.entries.append(call)
        reader.queued += 1

    def handle(req: Request) -> None:
        if req.kind == "status":
            replies.send("done", req.id, True, snapshot())
        elif req.kind in ("flush", "sync"):
            def answer(ok: bool, rid: int = req.id) -> None:
                replies.send("done", rid, ok, snapshot())
            waiter = _RemoteWaiter(answer)
            put(FlushCall(waiter) if req.kind == "flush" else SyncCall(waiter))
            engine.kick()
        elif req.kind == "stop":
            engine.discard_when_empty = bool(req.arg)
            asked.set()
            put(StopCall())
            engine.kick()
            stop.set()

    threading.Thread(target=feed, name="telescope-feeder", daemon=True).start()
    parent = setup["parent"]
    while thread.is_alive():
        if stop.wait(1.0) or os.getppid() != parent:
            break
    if thread.is_alive() and not asked.is_set():
        # the trainer is gone without closing: seal what it handed over, spill, stop
        log.info("telescope: the trainer process ended; writing its outbox to disk")
        put(StopCall())
        engine.kick()
    thread.join()
    left = engine.left
    replies.send("stopped", None if left is None else asdict(left), engine.discarded,
                 snapshot())
    os._exit(0)  # (the feeder may be blocked reading a pipe a forked child still holds)


__all__ = ["ProcessSender", "RemoteBooks", "serve"]
