"""`telescope sync`: deliver the outboxes trainers left undelivered (the server was down for
the whole run, the process was killed) to the server and run each was meant for, like `wandb
sync`. The command line is `trainer_hooks/sync.py`: `telescope-sync` (the trainer client's
console script, in every install), `telescope sync` (the server's), `python -m
trainer_hooks.sync`; none needs Django.

An outbox slot (`outbox`) remembers where its messages go: the run name, the server's ingest
URL and the token the trainer used (`Outbox.remember_target`; the file is mode 0600). Its
messages keep their ids and run incarnation, so the server's own rules put them in the run
they were logged for and acknowledge one it already stored as a duplicate (docs/protocol.md
"Runs, experiments and incarnations"): sync sends no `run.start` of its own and never makes a
run. Delivery is the sender's own `Connection` over the slot's `Outbox`, one slot at a time,
on an asyncio loop of the calling thread; it gives up on a slot when the server acknowledged
nothing for `patience` seconds, or refused for good (a bad token).

Concurrency: a slot is read and delivered only while sync holds its lock (`outbox.try_lock`,
the lock a client holds for its lifetime), taken for every slot of a run before the first is
sent. A slot a live trainer holds is left alone and reported as in use (that trainer sends
it); a trainer starting meanwhile takes another slot and cannot adopt those sync holds.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainer_hooks.transport.bookkeeping import Bookkeeping
from trainer_hooks.transport.connection import Connection
from trainer_hooks.transport.options import SenderOptions
from trainer_hooks.transport.outbox import Outbox, scope_of, try_lock
from trainer_hooks.transport.queue import FlushWaiters
from trainer_hooks.transport.run import RunTarget, ingest_url
from trainer_hooks.transport.spooled import Summary, stored_target, summarize
from trainer_hooks.wire.protocol import ProtocolError, decode_frame

log = logging.getLogger("trainer_hooks.sync")

PATIENCE = 30.0  # seconds without an acknowledgement before a slot is given up
OLD_OUTBOX = ("was written before outboxes kept their server and token: deliver it with "
              "`telescope-sync --url ws://HOST:PORT --token TOKEN` (the server and token the "
              "trainer used)")


def undelivered(run: str, url: str, left: Summary, path: Path | None, *, answered: bool,
                waited: float | None) -> str:
    """The one line `close()` logs when it leaves messages behind: what, why, where, and the
    command that delivers them."""
    within = "" if waited is None else f" within {waited:g} s"
    why = (f"{url} never answered" if not answered else
           f"{url} did not acknowledge them") + within
    if path is None:
        return (f"telescope: run {run!r}: {left.describe()} not delivered ({why}) are lost "
                "with this process: its outbox was in memory only")
    spool = path.parent.parent
    return (f"telescope: run {run!r}: {left.describe()} not delivered ({why}); spooled in "
            f"{path}; deliver them with: telescope-sync --spool {spool}")


@dataclass
class Slot:
    """One outbox file, inspected while sync holds its lock (`fd`, until handed on)."""

    path: Path
    fd: int | None
    held: Summary
    target: dict[str, str] = field(repr=False)  # (holds the token)

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


@dataclass
class RunReport:
    """What sync found and did for one run (a directory of slots)."""

    directory: Path
    run: str
    url: str | None = None
    pending: Summary = field(default_factory=Summary)
    delivered: Summary = field(default_factory=Summary)
    remaining: Summary = field(default_factory=Summary)
    duplicates: int = 0
    rejected: list[str] = field(default_factory=list)
    in_use: int = 0
    problems: list[str] = field(default_factory=list)
    opened: str | None = None  # the run the server put a run.start in

    @property
    def failed(self) -> bool:
        return bool(self.problems or self.rejected or self.remaining.total)

    @property
    def quiet(self) -> bool:
        """Nothing to say: every slot was empty."""
        return not (self.pending.total or self.in_use or self.problems or self.pending.unwritten)

    def line(self, dry_run: bool) -> str:
        head = f"{self.run} → {self.url}: " if self.url else f"{self.run}: "
        parts = []
        if dry_run and self.pending.total:
            parts.append(f"would deliver {self.pending.describe()} from {self.directory}")
        elif self.delivered.total:
            into = f" into run {self.opened}" if self.opened else ""
            again = f"; {self.duplicates:,} of them were already stored (acknowledged as " \
                "duplicates, not stored again)" if self.duplicates else ""
            parts.append(f"delivered {self.delivered.describe()}{into}{again}")
        if self.rejected:
            parts.append(f"{len(self.rejected):,} of them rejected by the server "
                         f"({self.rejected[0]})")
        if self.remaining.total:
            parts.append(f"NOT delivered: {self.remaining.describe()} remain in "
                         f"{self.directory}")
        if dry_run and self.pending.unwritten:
            parts.append(f"{self.pending.unwritten:,} messages cannot be delivered: a killed "
                         "process never wrote them to disk")
        parts += self.problems
        if self.in_use:
            parts.append(f"{self.in_use} outbox{'es' if self.in_use > 1 else ''} in use by a "
                         "running trainer, left alone (it delivers them)")
        return head + ("; ".join(parts) or "nothing to deliver")


@dataclass
class Plan:
    """How one `sync` delivers: `token` / `url` instead of each outbox's own, `dry_run`, the
    `patience` per slot, and the servers found unreachable so far (their slots are not tried
    again: a dead server costs `patience` once, not once per run)."""

    token: str | None = field(default=None, repr=False)
    url: str | None = None
    dry_run: bool = False
    patience: float = PATIENCE
    unreachable: dict[str, str] = field(default_factory=dict)


def sync(spool: Path, *, token: str | None = None, url: str | None = None,
         dry_run: bool = False, patience: float = PATIENCE,
         echo: Callable[[str], Any] = print) -> int:
    """Deliver every outbox under `spool` (with `dry_run`, only list them), echoing a line per
    run that had something; `token` / `url` replace what each outbox kept. Returns 0 when
    everything was delivered (outboxes in use aside), else 1."""
    plan = Plan(token, None if url is None else ingest_url(url), dry_run, patience)
    directories = sorted(p for p in spool.iterdir() if p.is_dir()) if spool.is_dir() else []
    failed = said = 0
    for directory in directories:
        report = sync_run(directory, plan)
        if not report.quiet:
            echo(report.line(dry_run))
            said += 1
        failed += report.failed
    if not said:
        n = len(directories)
        echo(f"telescope sync: nothing to deliver in {spool} (outboxes of {n} "
             f"run{'' if n == 1 else 's'} checked: none holds undelivered messages)")
    return 1 if failed else 0


def sync_run(directory: Path, plan: Plan) -> RunReport:
    """Deliver (or list) the slots of one run's directory."""
    # (the directory is named for its run: `outbox.run_key`; the slots say it exactly)
    report = RunReport(directory, run=directory.name.rsplit("-", 1)[0])
    slots: list[Slot] = []
    try:
        for path in sorted(directory.glob("*.sqlite")):
            slot = inspect(path, report)
            if slot is not None:
                slots.append(slot)
        # The owner's slot (its run.start) first: a reward worker's samples sent before it
        # would reach the newest run of that name instead of the one this start opens.
        slots.sort(key=lambda s: "run.start" not in s.held.messages)
        for slot in slots:
            report.pending += slot.held
            report.run = slot.target.get("run") or report.run
            report.url = plan.url or slot.target.get("url") or report.url
            token = plan.token or slot.target.get("token")
            if slot.held.total and not plan.dry_run:
                deliver(slot, report, token, plan)
            elif slot.held.total and not (report.url and token):
                report.problems.append(f"{slot.path.name} {OLD_OUTBOX}")
    finally:
        for slot in slots:
            slot.release()
    return report


def inspect(path: Path, report: RunReport) -> Slot | None:
    """The slot at `path`, locked and read (None when in use or unreadable: noted)."""
    fd = try_lock(path.with_suffix(".lock"))
    if fd is None:
        report.in_use += 1
        return None
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            if db.execute("SELECT 1 FROM sqlite_master WHERE name = 'outbox'").fetchone():
                held, target = summarize(db), stored_target(db)
                if "run" not in target:
                    target["run"] = first_run(db) or report.run
            else:  # (created, never written: nothing in it)
                held, target = Summary(), {}
        finally:
            db.close()
    except sqlite3.Error as exc:
        os.close(fd)
        report.problems.append(f"{path.name} could not be read ({exc})")
        return None
    return Slot(path, fd, held, target)


def first_run(db: sqlite3.Connection) -> str | None:
    """The run an old outbox's messages name (each names its run on the wire)."""
    row = db.execute("SELECT body, fmt FROM outbox WHERE length(body) > 0 ORDER BY seq"
                     " LIMIT 1").fetchone()
    try:
        message = decode_frame(bytes(row[0]), binary=row[1] == "msgpack") if row else None
    except ProtocolError:
        return None
    run = message.get("run") if isinstance(message, dict) else None
    return run if isinstance(run, str) else None


def deliver(slot: Slot, report: RunReport, token: str | None, plan: Plan) -> None:
    """Send one slot's messages, recording in `report` what left it and what stayed."""
    url = report.url
    if url is None or token is None or url in plan.unreachable:
        report.remaining += slot.held
        report.problems.append(plan.unreachable.get(url or "") or
                               f"{slot.path.name} {OLD_OUTBOX}")
        return
    target = RunTarget(url, token, report.run, scope_of(url, token))
    books = Bookkeeping(logging.getLogger("trainer_hooks.sender"))
    fd, slot.fd = slot.fd, None
    try:
        outbox = Outbox(slot.path, lock_fd=fd, bump_gen=False)  # (closes the lock with it)
        try:
            before = outbox.summary()
            lost = outbox.lost + outbox.in_doubt
            why, reached = asyncio.run(drain(outbox, target, books, plan.patience))
            after = outbox.summary()
        finally:
            outbox.close()
    except (sqlite3.Error, OSError) as exc:
        report.remaining += slot.held
        report.problems.append(f"{slot.path.name} could not be read or updated ({exc})")
        return
    report.delivered += before - after
    report.remaining += after
    report.duplicates += books["duplicates"]
    report.rejected += [f"{e['what']}: {e['why']}" for e in books.ledger.snapshot()
                        if e["reason"] == "rejected by the server"]
    if target.run_name is not None:
        report.opened = f"{target.run_name!r} (id {target.run_id})"
    if lost:
        report.problems.append(f"{lost} messages of {slot.path.name} cannot be delivered: a "
                               "killed process never wrote them to disk")
    if why is not None:
        report.problems.append(why)
        if not reached:
            plan.unreachable[url] = why


class _Connection(Connection):
    """The sender's connection, remembering why the server could not be reached, and sending
    no heartbeats: a heartbeat says the trainer is alive, and sync is not that trainer."""

    last_failure: str | None = None

    def note_failure(self, what: str) -> None:
        self.last_failure = what
        super().note_failure(what)

    async def heartbeat(self, ws: Any) -> None:
        await asyncio.Event().wait()  # (a session task: returns only when cancelled)


async def drain(outbox: Outbox, target: RunTarget, books: Bookkeeping,
                patience: float) -> tuple[str | None, bool]:
    """Send `outbox` until it is empty. Returns why it stopped short (None: it did not) — a
    refusal for good (a bad token), or nothing acknowledged for `patience` seconds — and
    whether the server was reached (a connection opened, or a refusal)."""
    new_messages = asyncio.Event()
    new_messages.set()
    connection = _Connection(target, SenderOptions(backoff_max=2.0), outbox,
                             FlushWaiters(outbox, books.losses), books,
                             new_messages=new_messages, cap_batch_bytes=lambda _: None)
    task = asyncio.create_task(connection.run())
    seen, since = -1, time.monotonic()
    try:
        while outbox.rows and connection.fatal is None and not task.done():
            progress = books["acked"] + books["rejected"] + books["splits"]
            if progress != seen:
                seen, since = progress, time.monotonic()
            elif time.monotonic() - since > patience:
                how = connection.last_failure or "connected, no acknowledgement"
                reached = bool(books["connects"])
                return f"nothing acknowledged for {patience:g} s ({how})", reached
            await asyncio.sleep(0.05)
        if task.done() and not task.cancelled() and task.exception() is not None:
            return f"sending failed: {task.exception()!r}", True
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    return connection.fatal, True
