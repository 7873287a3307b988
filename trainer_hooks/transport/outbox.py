"""The sender's durable outbox: encoded messages in a local SQLite file, replayed in order.

(The messages are encoded by `wire.protocol.encode`; this module only keeps their bytes.)

Every message the sender seals is entered here *before* it is sent and deleted when the server
acknowledges it (or rejects it), so the outbox is exactly the set of messages not yet
acknowledged; replaying it in `seq` order after a reconnect or a restart of the training process
resends them with their original ids and the server applies each once.

A *staged* outbox (the sender's default, `connect(spill_after=...)`) writes each message's row
and sample identities at once but keeps its body in memory (its row's body is empty on disk)
until `spill` writes it: the sender spills a body that waited `spill_after` seconds
unacknowledged, every body while the server is away, on `sync()` and when the client stops. A
message the server acknowledges within `spill_after` never has its body written to disk (about
half of the sender's work before: bench/peers_workload.py). A process killed before it spilled
loses those messages: the next open of the slot drops their rows and says how many. Those
never sent (`Outbox.lost`) lose their sample identities too, so a resume logs those samples
again; those sent (`Outbox.in_doubt`; the connection records in `meta` how far it has sent,
`mark_sent`, before it sends) may be stored, so their identities stay and a resume leaves
those samples out. A transaction's changes to the in-memory state (counts, staged bodies)
happen only once it commits (`_Tx`, `on_commit`).

Layout: `<spool dir>/<run key>/<slot>.sqlite`, `<slot>` = `slot-<i>` or a given name (a
client that ends its run `finished`, or joined one, with everything acknowledged removes its
slot and, when it was the last, the run's directory: `Outbox.discard`); the run
key names the run and hashes it with the server URL and token (`scope`), so an outbox is only
ever replayed to the server and project it was written for. A client
holds an exclusive advisory lock (`<slot>.lock`, flock) on its slot for its lifetime, so
concurrent clients of one run on one machine (reward workers) each get their own slot; a new
client takes its named slot or the lowest free one, and adopts the pending messages of any other
unlocked slot (a client that died).

Tables:
- `outbox(seq INTEGER PRIMARY KEY AUTOINCREMENT, msg_id TEXT UNIQUE, kind, n, fmt, body, created)`
  — `fmt` is 'msgpack' (binary frame) or 'json' (text frame); `n` the sample count.
- `sealed(step_min, step_max, gen, incarnation, data, seq)` — which samples each process (`gen`)
  of this slot has sealed for which run incarnation (per samples message: msgpack `[step, env,
  group ids, sample ids]`, an integer array in its narrowest width, `narrow_ints`, a list of
  strings as one, `lines`; `seq` the
  message's), for the last few thousand steps, so a trainer that
  *resumes* its run (`connect(..., resume=True)`) and re-logs the steps after its checkpoint
  does not double-count samples already on their way. Only a resume of the same incarnation
  consults it; a new experiment under the same name never does.
- `meta(name, value)` — `gen` (the process counter), `incarnation` (the run attempt the
  slot's latest client sent for; a resume continues it), `sent` (the highest seq sent), and
  `run`, `url`, `token`: where the messages go (`remember_target`), so that `telescope sync`
  (`transport.sync`) can deliver them once the trainer is gone. Because of the token the file
  (and SQLite's `-wal` and `-shm` beside it) is readable by its owner only (mode 0600).

The connection is used by one thread at a time (the sender's event-loop thread).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import sqlite3
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import msgpack
import numpy as np

from trainer_hooks.transport.spooled import TARGET_KEYS, Summary, summarize

_fcntl: ModuleType | None
try:
    import fcntl as _fcntl
except ImportError:  # pragma: no cover - not POSIX: slots are not locked
    _fcntl = None

log = logging.getLogger("trainer_hooks.spool")

MAX_SLOTS = 64
DELETE_CHUNK = 500  # message ids per DELETE statement (SQLite takes 32,766 parameters)
_SCHEMA = """
CREATE TABLE IF NOT EXISTS outbox (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    msg_id TEXT NOT NULL UNIQUE,
    kind TEXT NOT NULL,
    n INTEGER NOT NULL DEFAULT 0,
    fmt TEXT NOT NULL,
    body BLOB NOT NULL,
    created REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS sealed (
    id INTEGER PRIMARY KEY,
    step_min INTEGER NOT NULL,
    step_max INTEGER NOT NULL,
    gen INTEGER NOT NULL,
    incarnation TEXT NOT NULL,
    data BLOB NOT NULL,
    seq INTEGER
);
CREATE INDEX IF NOT EXISTS sealed_steps ON sealed (incarnation, step_max, step_min);
CREATE INDEX IF NOT EXISTS sealed_seq ON sealed (seq);
DROP TABLE IF EXISTS logged;
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
"""


# An integer column of an identity record (this outbox's own, never sent): msgpack extension
# NARROW + itemsize holding the values as little-endian int8/16/32/64, the narrowest that
# holds them (one block of bytes instead of N msgpack items, no wider than msgpack's ints).
NARROW = 16
_WIDTHS = tuple((np.dtype(f"<i{k}"), np.iinfo(f"<i{k}")) for k in (1, 2, 4, 8))


def identity_columns(data: bytes) -> list[Any]:
    """An identity record back: [step, env, group ids, sample ids], plain Python values."""
    columns: list[Any] = msgpack.unpackb(data, raw=False, ext_hook=_wide)
    return columns


def narrow_ints(value: Any) -> Any:
    """An integer array as its NARROW extension value (anything else as it is)."""
    if not isinstance(value, np.ndarray) or value.dtype.kind not in "iu" or not value.size:
        return value
    lo, hi = int(value.min()), int(value.max())
    for dtype, info in _WIDTHS:
        if info.min <= lo and hi <= info.max:
            return msgpack.ExtType(NARROW + dtype.itemsize, value.astype(dtype).tobytes())
    return value  # (uint64 beyond int64: as a list)


# A string column of an identity record (the env per sample, string ids): extension LINES
# holding the strings joined by newlines in UTF-8, when none holds a newline or is None (one C
# join instead of N msgpack strings; measured: a 4,096-sample record with a per-sample env
# 139 -> 81 µs).
LINES = 32


def lines(value: Any) -> Any:
    """A list of strings as its LINES extension value (anything else as it is)."""
    if type(value) is not list or not value:
        return value
    try:
        joined = "\n".join(value)
    except TypeError:  # a None (or a non-string) among them
        return value
    if joined.count("\n") != len(value) - 1:
        return value  # (a string holds a newline itself)
    return msgpack.ExtType(LINES, joined.encode("utf-8"))


def _wide(code: int, data: bytes) -> Any:
    if code - NARROW in (1, 2, 4, 8):
        return np.frombuffer(data, dtype=f"<i{code - NARROW}").tolist()
    if code == LINES:
        return data.decode("utf-8").split("\n")
    return msgpack.ExtType(code, data)


@dataclass
class Outgoing:
    """A sealed message ready to spool: its id, type, sample count, format and bytes, plus
    the identity of the samples it carries (`(step_min, step_max, msgpack [step, env, group
    ids, sample ids])`, for restart de-duplication)."""

    msg_id: str
    kind: str
    n: int
    fmt: str
    body: bytes
    ident: tuple[int, int, bytes] | None = None


@dataclass(frozen=True)
class Row:
    seq: int
    msg_id: str
    kind: str
    n: int
    fmt: str
    body: bytes


def default_dir() -> Path:
    env = os.environ.get("TELESCOPE_SPOOL_DIR")
    return Path(env) if env else Path.home() / ".cache" / "telescope" / "spool"


def scope_of(url: str, token: str) -> str:
    """What an outbox belongs to besides its run name: the server and the token's project
    (the token is only hashed, never stored)."""
    return hashlib.sha256(f"{url}\n{token}".encode()).hexdigest()[:16]


def run_key(run: str, scope: str = "") -> str:
    """A file-system-safe directory name for a run, unique per run name and scope."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", run)[:64]
    return f"{safe}-{hashlib.sha256(f'{scope}/{run}'.encode()).hexdigest()[:10]}"


class Outbox:
    """One outbox file (or an in-memory one when `path` is None)."""

    def __init__(self, path: Path | None, *, lock_fd: int | None = None,
                 fsync: bool = False, bump_gen: bool = True, staged: bool = False) -> None:
        self.path = path
        self._lock_fd = lock_fd
        # seq -> (body, when sealed) of the messages whose body is not on disk yet (staged)
        self._staged: dict[int, tuple[bytes, float]] = {}
        self.staged_bytes = 0
        self.staging = staged and path is not None
        self.lost = 0  # messages an earlier process staged and never sent (gone with it)
        self.in_doubt = 0  # ... and staged, sent, never acknowledged (the server may have them)
        self._after: list[Callable[[], None]] = []
        self._sent_mark = 0
        if path is not None:
            try:
                _make_private(path)
            except OSError:
                if lock_fd is not None:
                    os.close(lock_fd)  # (the slot's lock must not outlive a failed open)
                raise
        self._db = sqlite3.connect(":memory:" if path is None else str(path),
                                   isolation_level=None, check_same_thread=False)
        try:
            if path is not None:
                _tune(self._db, fsync)
            self._upgrade()
            self._db.executescript(_SCHEMA)
            with self._tx():
                gen = int(self._meta("gen") or 0) + bump_gen
                self._db.execute("INSERT OR REPLACE INTO meta VALUES ('gen', ?)", (str(gen),))
                self._drop_unspilled()
        except BaseException:
            self.close()
            raise
        self.gen = gen
        self.incarnation = ""
        self.prev_max_step: int | None = None
        row = self._db.execute("SELECT count(*), coalesce(sum(length(body)), 0) FROM outbox")
        self.rows, self.bytes = row.fetchone()
        self.last_seq: int = self._db.execute(
            "SELECT coalesce(max(seq), 0) FROM outbox").fetchone()[0]

    def _upgrade(self) -> None:
        """Outbox files written before staging have no `sealed.seq`: add it (their sample
        identities all belong to messages whose body is on disk)."""
        cols = [row[1] for row in self._db.execute("PRAGMA table_info(sealed)")]
        if cols and "seq" not in cols:
            self._db.execute("ALTER TABLE sealed ADD COLUMN seq INTEGER")

    def _drop_unspilled(self) -> None:
        """Rows whose body an earlier process kept in memory and never wrote (it died first)
        cannot be sent again: they go. One that was never sent (seq above the `sent` mark) is
        lost, and its sample identities go with it, so a resume logs those samples again. One
        that was sent may be stored: the server cannot be asked, so its identities stay (a
        resume leaves those samples out rather than risk counting them twice)."""
        sent = int(self._meta("sent") or 0)
        gone = [row[0] for row in self._db.execute(
            "SELECT seq FROM outbox WHERE length(body) = 0")]
        lost = [q for q in gone if q > sent]
        self.lost, self.in_doubt = len(lost), len(gone) - len(lost)
        if lost:
            self._db.executemany("DELETE FROM sealed WHERE seq = ?", [(q,) for q in lost])
        if gone:
            self._db.executemany("DELETE FROM outbox WHERE seq = ?", [(q,) for q in gone])
            self._db.execute("UPDATE sealed SET seq = NULL WHERE seq <= ?", (sent,))
            log.warning("telescope: a process of %s ended before writing %d messages to disk "
                        "that the server had not acknowledged (killed within spill_after of "
                        "logging them): %d were never sent and are lost (a resume logs their "
                        "samples again); %d were sent and may be stored (a resume leaves their "
                        "samples out)", self.path, len(gone), self.lost, self.in_doubt)

    # ---------------------------------------------------------------- transactions

    def _tx(self) -> _Tx:
        return _Tx(self)

    def on_commit(self, fn: Callable[[], None]) -> None:
        """Run `fn` once the current transaction commits (dropped if it rolls back)."""
        self._after.append(fn)

    def _meta(self, name: str) -> str | None:
        row = self._db.execute("SELECT value FROM meta WHERE name = ?", (name,)).fetchone()
        return None if row is None else row[0]

    def remember_target(self, run: str, url: str, token: str) -> None:
        """Record where this outbox's messages go: the run name, the server's ingest URL and
        the token (the file is private), for `telescope sync` after the trainer is gone."""
        with self._tx():
            self._db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                                 zip(TARGET_KEYS, (run, url, token), strict=True))

    def summary(self) -> Summary:
        """The pending messages by type (`spooled.Summary`); a body still staged in memory
        counts as unwritten (the sender spills every body before it stops)."""
        return summarize(self._db)

    def take_incarnation(self, resume: bool, new: str) -> str:
        """This process's run incarnation: with `resume` the one this slot sent for last (if
        any), else `new`; remembered for the next resume. Returns it."""
        old = self._meta("incarnation") if resume else None
        self.incarnation = old or new
        with self._tx():
            self._db.execute("INSERT OR REPLACE INTO meta VALUES ('incarnation', ?)",
                             (self.incarnation,))
        self.prev_max_step = self._db.execute(
            "SELECT max(step_max) FROM sealed WHERE incarnation = ? AND gen < ?",
            (self.incarnation, self.gen)).fetchone()[0]
        return self.incarnation

    def append(self, messages: Sequence[Outgoing], *, staged: bool | None = None) -> int:
        """Write messages (and their sample keys) in one transaction; returns the last seq.
        `staged` False: bodies on disk now even in a staged outbox (messages that were safe on
        disk already: adopted or replaced ones)."""
        now, sealed_at = time.time(), time.monotonic()
        staging = self.staging if staged is None else staged and self.staging
        added: list[tuple[int, bytes]] = []
        with self._tx():
            for m in messages:
                cur = self._db.execute(
                    "INSERT OR IGNORE INTO outbox (msg_id, kind, n, fmt, body, created)"
                    " VALUES (?, ?, ?, ?, ?, ?)",
                    (m.msg_id, m.kind, m.n, m.fmt, b"" if staging else m.body, now))
                seq = cur.lastrowid if cur.rowcount else None
                if seq is not None:
                    added.append((seq, m.body))
                if m.ident is not None:  # (seq NULL: its body is on disk)
                    self._db.execute("INSERT INTO sealed (step_min, step_max, gen, incarnation,"
                                     " data, seq) VALUES (?, ?, ?, ?, ?, ?)",
                                     (*m.ident[:2], self.gen, self.incarnation, m.ident[2],
                                      seq if staging else None))
            last: int = self._db.execute("SELECT coalesce(max(seq), 0) FROM outbox").fetchone()[0]

            def done() -> None:
                self.last_seq = last
                self.rows += len(added)
                for seq, body in added:
                    self.bytes += len(body)
                    if staging:
                        self._staged[seq] = (body, sealed_at)
                        self.staged_bytes += len(body)
            self.on_commit(done)
        return last

    def spill(self, older_than: float | None = None) -> int:
        """Write the staged bodies to disk — those sealed before `older_than` (a
        time.monotonic() value), or all — in one transaction; returns how many."""
        if not self._staged:
            return 0
        due = [(seq, body) for seq, (body, at) in self._staged.items()
               if older_than is None or at < older_than]
        if not due:
            return 0
        with self._tx():
            self._db.executemany("UPDATE outbox SET body = ? WHERE seq = ?",
                                 [(body, seq) for seq, body in due])
            self._db.executemany("UPDATE sealed SET seq = NULL WHERE seq = ?",
                                 [(seq,) for seq, _ in due])

            def done() -> None:
                for seq, body in due:
                    if self._staged.pop(seq, None) is not None:
                        self.staged_bytes -= len(body)
            self.on_commit(done)
        return len(due)

    def mark_sent(self, seq: int) -> None:
        """(Staged outbox) the messages up to `seq` are about to be sent: recorded first, so
        that after a crash one whose body was never written counts as possibly stored."""
        if self.staging and seq > self._sent_mark:
            with self._tx():
                self._db.execute("INSERT OR REPLACE INTO meta VALUES ('sent', ?)", (str(seq),))
            self._sent_mark = seq

    def oldest_staged(self) -> float | None:
        """When the longest-staged body was sealed (time.monotonic()), or None."""
        for _, at in self._staged.values():  # (sealed in seq order: the first is the oldest)
            return at
        return None

    def pending(self, after_seq: int = 0, limit: int = 64,
                max_bytes: int | None = None) -> list[Row]:
        """Unacknowledged messages with seq > `after_seq`, oldest first: at most `limit`, and
        no more than `max_bytes` of bodies (but at least one)."""
        cur = self._db.execute(
            "SELECT seq, msg_id, kind, n, fmt, body FROM outbox WHERE seq > ? ORDER BY seq"
            " LIMIT ?", (after_seq, limit))
        rows: list[Row] = []
        size = 0
        for s, i, k, n, f, b in cur:
            body = bytes(b) if b else self._staged[s][0]
            size += len(body)
            if rows and max_bytes is not None and size > max_bytes:
                break
            rows.append(Row(s, i, k, n, f, body))
        cur.close()
        return rows

    def delete(self, msg_ids: Iterable[str]) -> None:
        """Forget acknowledged (or rejected) messages."""
        msg_ids = list(msg_ids)
        if not msg_ids:
            return
        with self._tx():
            gone = []
            for i in range(0, len(msg_ids), DELETE_CHUNK):  # (one statement per chunk)
                part = msg_ids[i:i + DELETE_CHUNK]
                gone += self._db.execute(
                    f"DELETE FROM outbox WHERE msg_id IN ({','.join('?' * len(part))})"
                    " RETURNING seq, length(body)", part).fetchall()

            def done() -> None:
                for seq, size in gone:
                    self.rows -= 1
                    staged = self._staged.pop(seq, None)
                    if staged is not None:
                        size = len(staged[0])
                        self.staged_bytes -= size
                    self.bytes -= size
            self.on_commit(done)

    def replace(self, msg_id: str, messages: Sequence[Outgoing]) -> None:
        """Swap one message for others (a split), atomically; they go to the end, their bodies
        on disk (rare; the original's sample identities now stand for them)."""
        with self._tx():
            self._db.execute("UPDATE sealed SET seq = NULL WHERE seq ="
                             " (SELECT seq FROM outbox WHERE msg_id = ?)", (msg_id,))
            self.delete([msg_id])
            self.append(messages, staged=False)

    def min_seq(self) -> int | None:
        low: int | None = self._db.execute("SELECT min(seq) FROM outbox").fetchone()[0]
        return low

    # ---------------------------------------------------------------- restart de-duplication

    def previous_keys(self, lo: int, hi: int) -> dict[int, set[tuple[str, str, str]]]:
        """(env, group id, sample id) of the samples of steps lo..hi that an earlier process
        of this slot sealed for the same run incarnation, per step."""
        out: dict[int, set[tuple[str, str, str]]] = defaultdict(set)
        cur = self._db.execute("SELECT data FROM sealed WHERE incarnation = ? AND gen < ? AND"
                               " step_max >= ? AND step_min <= ?",
                               (self.incarnation, self.gen, lo, hi))
        for (data,) in cur:
            steps, env, gids, sids = identity_columns(data)
            n = len(sids)
            steps = steps if isinstance(steps, list) else [steps] * n
            envs = env if isinstance(env, list) else [env] * n
            for s, e, g, i in zip(steps, envs, gids, sids, strict=True):
                if lo <= s <= hi:
                    out[s].add((e or "", str(g), str(i)))
        return out

    def prune_keys(self, below_step: int) -> None:
        with self._tx():
            self._db.execute("DELETE FROM sealed WHERE incarnation = ? AND step_max < ?",
                             (self.incarnation, below_step))
            self._db.execute("DELETE FROM sealed WHERE incarnation != ?", (self.incarnation,))

    # ---------------------------------------------------------------- adoption

    def adopt(self, other: Outbox) -> int:
        """Move another (dead) slot's pending messages to the end of this one; returns how
        many. Its sample keys stay with it, for the client that takes that slot next."""
        rows = other.pending(0, 1 << 62)
        if rows:  # (on disk there: on disk here, before they leave there)
            self.append([Outgoing(r.msg_id, r.kind, r.n, r.fmt, r.body) for r in rows],
                        staged=False)
            other.delete(r.msg_id for r in rows)
        self.lost += other.lost
        self.in_doubt += other.in_doubt
        return len(rows)

    # ---------------------------------------------------------------- failure

    def move_to_memory(self, why: BaseException | None = None) -> None:
        """Carry on in memory when the file fails (a full disk; `why`, logged): the pending
        messages move to an in-memory database with their sequence numbers, and new ones
        continue after `last_seq`, so a sent message still meets its ack and every flush keeps
        its target. The file and its slot lock are let go; without a file, sealed samples are
        no longer remembered for a resume."""
        if why is not None:
            log.error("telescope: writing the outbox failed (%s); continuing in memory only",
                      why)
        try:
            rows = self.pending(0, 1 << 62)
        except sqlite3.Error:
            rows = []  # unreadable too: what it held is lost with it
        try:
            self.close()
        except sqlite3.Error:
            pass
        self.path, self.prev_max_step = None, None
        self._db = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        self._db.executescript(_SCHEMA)
        now = time.time()
        self._staged, self.staged_bytes, self.staging, self._after = {}, 0, False, []
        with self._tx():
            self._db.executemany(
                "INSERT INTO outbox (seq, msg_id, kind, n, fmt, body, created)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                [(r.seq, r.msg_id, r.kind, r.n, r.fmt, r.body, now) for r in rows])
            self._db.execute("DELETE FROM sqlite_sequence WHERE name = 'outbox'")
            self._db.execute("INSERT INTO sqlite_sequence (name, seq) VALUES ('outbox', ?)",
                             (self.last_seq,))
        self.rows, self.bytes = len(rows), sum(len(r.body) for r in rows)

    def close(self) -> None:
        try:
            self._db.close()
        finally:
            if self._lock_fd is not None:
                os.close(self._lock_fd)  # releases the flock
                self._lock_fd = None

    def discard(self) -> bool:
        """Close, and remove this outbox's files when it holds nothing (every message
        acknowledged, nothing staged), then its run's directory when no other slot is in it;
        whether the files went. The slot's lock is held until its files are gone, and
        `try_lock` refuses a lock file that was removed meanwhile, so no other client writes
        into a removed slot."""
        path = self.path
        if path is None or self.rows or self._staged:
            self.close()
            return False
        try:
            self._db.close()
            for suffix in ("", "-wal", "-shm"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path.with_name(path.name + suffix))
            if self._lock_fd is not None:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path.with_suffix(".lock"))
        except OSError as exc:
            log.info("telescope: could not remove the delivered outbox %s: %s", path, exc)
            return False
        finally:
            self.close()
        with contextlib.suppress(OSError):  # not empty: another slot of the run is there
            path.parent.rmdir()
        return True


class _Tx:
    """BEGIN IMMEDIATE … COMMIT (ROLLBACK on error); nested use joins the outer one. What the
    transaction changes in memory (`Outbox.on_commit`) happens once the outermost COMMIT
    succeeded, and never after a rollback."""

    def __init__(self, box: Outbox) -> None:
        self.box = box
        self.outer = False

    def __enter__(self) -> None:
        db = self.box._db
        if not db.in_transaction:
            db.execute("BEGIN IMMEDIATE")
            self.outer = True
            self.box._after = []

    def __exit__(self, exc_type: Any, *_: Any) -> None:
        if not self.outer:
            return
        after, self.box._after = self.box._after, []
        if exc_type:
            self.box._db.execute("ROLLBACK")
            return
        self.box._db.execute("COMMIT")
        for fn in after:
            fn()


def _tune(db: sqlite3.Connection, fsync: bool) -> None:
    """How an outbox file is written."""
    db.execute("PRAGMA journal_mode=WAL")
    db.execute(f"PRAGMA synchronous={'FULL' if fsync else 'NORMAL'}")
    db.execute("PRAGMA busy_timeout=5000")
    # Messages are written, then deleted once acknowledged, within seconds: a log of 16 MB (not
    # SQLite's 4 MB) lets most pages die before a checkpoint copies them into the database
    # (measured: ~20% less CPU per sealed message).
    db.execute("PRAGMA wal_autocheckpoint=4000")
    # Debian builds SQLite zeroing freed pages: each acknowledged message's delete wrote its
    # body to the log again (measured: the sender's writes 635 -> 290 MB for
    # bench/peers_workload.py's 2,000 steps).
    db.execute("PRAGMA secure_delete=OFF")


def _make_private(path: Path) -> None:
    """Owner-only access to an outbox file (it holds the ingest token), made so before SQLite
    opens it: SQLite gives its -wal and -shm files the database file's mode. A file from before
    tokens were kept is made private too (unless it is someone else's: left as it is)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        with contextlib.suppress(PermissionError):
            os.fchmod(fd, 0o600)
    finally:
        os.close(fd)
    for suffix in ("-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError, PermissionError):
            os.chmod(path.with_name(path.name + suffix), 0o600)


LOCK_WAIT = 30.0  # seconds a slot held for a dead trainer is waited for (its sender process)


def try_lock(path: Path, owner: int | None = None) -> int | None:
    """The exclusive lock on a slot (its `.lock` file): the open descriptor that holds it, or
    None when another process holds it (a live client, or `telescope sync` delivering it).
    A lock taken on a file its holder removed meanwhile (`Outbox.discard`) is taken again on
    the file now at `path`. The holder writes its `owner` into the file: the process whose
    messages the slot holds (this one, or the trainer a sender process works for). A slot
    held for an owner that is dead — a sender process writing its killed trainer's outbox to
    disk — is waited for (at most LOCK_WAIT), so that a trainer restarted at once replays
    and resumes from its own slot."""
    for _ in range(8):
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        if _fcntl is None:
            return fd
        try:
            _fcntl.flock(fd, _fcntl.LOCK_EX | _fcntl.LOCK_NB)
        except BlockingIOError:
            if not (_held_for_the_dead(fd) and _wait_for_lock(fd)):
                os.close(fd)
                return None
        try:
            if os.fstat(fd).st_ino == os.stat(path).st_ino:
                os.ftruncate(fd, 0)
                os.pwrite(fd, str(owner or os.getpid()).encode(), 0)
                return fd
        except FileNotFoundError:
            pass
        os.close(fd)  # removed while we waited for it: lock the one at `path` now
    raise OSError(f"cannot lock {path}: it keeps being removed")


def _held_for_the_dead(fd: int) -> bool:
    """The lock file names an owner process that no longer runs (or is a zombie)."""
    try:
        pid = int(os.pread(fd, 32, 0) or b"0")
    except (OSError, ValueError):
        return False
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False  # (another user's: alive)
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] == b"Z"
    except (OSError, IndexError):
        return False


def _wait_for_lock(fd: int) -> bool:
    assert _fcntl is not None
    deadline = time.monotonic() + LOCK_WAIT
    while time.monotonic() < deadline:
        time.sleep(0.02)
        try:
            _fcntl.flock(fd, _fcntl.LOCK_EX | _fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            continue
    return False


def open_slot(directory: Path, run: str, *, name: str | None = None,
              fsync: bool = False, scope: str = "", staged: bool = False,
              url: str | None = None, token: str | None = None,
              owner: int | None = None) -> Outbox:
    """Open (creating) this client's slot of `run` under `directory` and adopt the pending
    messages of unlocked slots left by clients that died.

    With `name` the slot is `<name>.sqlite` (a stable identity for one of several workers of
    a run on one machine, so its restart finds its own sample keys); otherwise, or when that
    name is in use, the lowest free `slot-<i>.sqlite`. With `url` and `token` the slot
    remembers them (`Outbox.remember_target`), for `telescope sync`. `owner`: the process
    whose messages it holds (`try_lock`; default this one)."""
    base = directory / run_key(run, scope)
    candidates = [f"slot-{i}" for i in range(MAX_SLOTS)]
    if name is not None:
        candidates.insert(0, re.sub(r"[^A-Za-z0-9._-]", "_", name)[:64])
    mine: Outbox | None = None
    for stem in candidates:
        fd = _lock_in(base, f"{stem}.lock", owner)
        if fd is not None:
            if name is not None and stem != candidates[0]:
                log.warning("telescope: spool slot %r is in use; using %s", name, stem)
            mine = Outbox(base / f"{stem}.sqlite", lock_fd=fd, fsync=fsync, staged=staged)
            break
    if mine is None:
        raise OSError(f"all {MAX_SLOTS} spool slots of {base} are in use")
    if url is not None and token is not None:
        try:
            mine.remember_target(run, url, token)
        except BaseException:
            mine.close()
            raise
    _adopt_dead(mine, base, fsync)
    return mine


def _lock_in(base: Path, name: str, owner: int | None = None) -> int | None:
    """`try_lock` of `base / name`, making `base` (again, when the last client of the run
    removed it meanwhile: `Outbox.discard`)."""
    for _ in range(8):
        base.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            return try_lock(base / name, owner)
        except FileNotFoundError:
            continue
    raise OSError(f"cannot make the spool directory {base}: it keeps being removed")


def _adopt_dead(mine: Outbox, base: Path, fsync: bool) -> None:
    """Move the pending messages of every unlocked slot of `base` (a client that died) into
    `mine`."""
    for other_path in sorted(base.glob("*.sqlite")):
        if other_path == mine.path:
            continue
        fd = try_lock(other_path.with_suffix(".lock"))
        if fd is None:
            continue
        if not other_path.exists():  # its client removed it, delivered, meanwhile
            with contextlib.suppress(FileNotFoundError):
                os.unlink(other_path.with_suffix(".lock"))
            os.close(fd)
            continue
        other = Outbox(other_path, lock_fd=fd, fsync=fsync, bump_gen=False)
        try:
            moved = mine.adopt(other)
            if moved:
                log.info("telescope: adopted %d pending messages from %s", moved, other_path)
        finally:
            other.close()
