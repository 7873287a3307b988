"""The pump: the caller's queued `log_*` calls → validated, sealed messages in the outbox.

Runs on the sender thread (`SenderEngine`). Step metrics are checked key by key (a bad key or
value is left out and counted); samples are converted to columns (`sample_columns`), batched
(`batching`) and sealed at the latest `flush_interval` after the first sample waited. Every
sealed message gets its unique id (`<12 hex of a uuid4>-<counter>`) and is written to the
outbox before the connection may send it, carrying the client's run incarnation. When the
client resumes its run (`resume=True`), samples that an earlier process of the same outbox
already sealed for that incarnation (re-logged after a checkpoint) are left out, counted and
warned about; a new experiment never leaves anything out. Every value not stored goes to the
client's ledger with its reason.
"""

from __future__ import annotations

import itertools
import logging
import operator
import sqlite3
import time
import uuid
from typing import TYPE_CHECKING, Any

import numpy as np

from trainer_hooks import spool as spool_mod
from trainer_hooks.batching import Batch, identity_record
from trainer_hooks.protocol import (
    MAX_METRICS_PER_MESSAGE,
    MAX_TEXT_CHARS,
    VERSION,
    ProtocolError,
    check_key,
)
from trainer_hooks.reward_result import results_to_columns
from trainer_hooks.sample_columns import OPTIONAL_COLUMNS, SampleChunk, SampleError, make_chunk
from trainer_hooks.schema import _CONTROL, MAX_UNIX_SECONDS
from trainer_hooks.sender_queue import (
    CONTROL,
    FLUSH,
    REWARDS,
    SAMPLES,
    STEP,
    STOP,
    SYNC,
    Waiter,
)
from trainer_hooks.spool import Outgoing

if TYPE_CHECKING:
    from trainer_hooks.sender_engine import SenderEngine

log = logging.getLogger("trainer_hooks.sender")

PUMP_BATCH = 2000  # entries handled per pump pass, so acks keep flowing under a flood


class Sealer:
    """Turns queue entries into outbox messages; owned by a `SenderEngine`."""

    def __init__(self, engine: SenderEngine) -> None:
        self.e = engine
        self.o = engine.o
        self.prefix = uuid.uuid4().hex[:12]
        self.counter = itertools.count()
        self.valid_keys: set[str] = set()
        self.prev_keys: dict[int, set[tuple[str, str, str]]] = {}
        self.max_step = -1
        self.appends = 0
        self.since_barrier = 0  # messages sealed since the last barrier (replays count too)

    def pump_once(self) -> bool:
        """Seal what the caller queued into the outbox; True when asked to stop."""
        e = self.e
        out: list[Outgoing] = []
        syncs: list[Waiter] = []
        flushes: list[Waiter] = []
        stop = False
        queue = e.c._queue
        for _ in range(PUMP_BATCH):
            if not queue:
                break
            entry = queue.popleft()
            try:
                stop = self.seal_entry(entry, out, syncs, flushes) or stop
            except Exception as exc:  # noqa: BLE001 - one bad entry must not stop the sender
                e.counts["internal_errors"] += 1
                e.warn_once(("internal", type(exc)), "telescope: sender error: %r", exc)
        if queue:
            e.kick_event.set()
        if len(queue) < e.c._max_queue:
            e.c._room.set()  # wake callers waiting for room (back-pressure)
        # sealed at most flush_interval after the first sample, whatever the poll phase
        if e.batcher.due(time.monotonic(), self.o.flush_interval - self.o.poll_interval):
            self.seal_pending(out)
        ok = self.write(out)
        for w in syncs:
            w.resolve(ok)
        for w in flushes:
            w.target = e.spool.last_seq if e.spool else 0
            e.flush_waiters.append(w)
        e.check_waiters()
        return stop

    def seal_entry(self, entry: tuple[Any, ...], out: list[Outgoing], syncs: list[Waiter],
                   flushes: list[Waiter]) -> bool:
        """Handle one queue entry; True for the stop entry."""
        tag = entry[0]
        if tag == STEP:
            self.seal_step(entry, out)
        elif tag in (SAMPLES, REWARDS):
            self.add_samples(entry, out)
        elif tag == CONTROL:
            self.seal_pending(out)
            if entry[1]["type"] == "barrier":
                if not self.since_barrier:
                    return False  # nothing sealed since the last one: nothing to wait for
                self.since_barrier = -1
            self.seal_message(entry[1], out)
        else:
            self.seal_pending(out)
            if tag == FLUSH:
                flushes.append(entry[1])
            elif tag == SYNC:
                syncs.append(entry[1])
            elif tag == STOP:
                return True
        return False

    # ---------------------------------------------------------------- steps

    def seal_step(self, entry: tuple[Any, ...], out: list[Outgoing]) -> None:
        _, step, metrics, t = entry
        try:
            step = step_number(step)
        except (TypeError, ValueError) as exc:
            self.invalid("step", f"log_step: {exc}")
            return
        clean = self.clean_metrics(step, metrics)
        if metrics and not clean:
            self.invalid("step", f"log_step: step {step} has no usable metric")
            return
        if not (type(t) in (int, float) and 0 <= t < MAX_UNIX_SECONDS):
            self.left_out(step, "time", f"{t!r:.40} is not unix seconds; the time of the "
                          "call is used")
            t = time.time()
        items = list(clean.items())
        for i in range(0, max(len(items), 1), MAX_METRICS_PER_MESSAGE):
            part = dict(items[i:i + MAX_METRICS_PER_MESSAGE])
            self.seal_message({"type": "step", "step": step, "metrics": part, "time": t}, out)
        self.e.counts["logged_steps"] += 1

    def clean_metrics(self, step: int, metrics: dict[str, Any]) -> dict[str, Any]:
        """The metrics with valid keys and values the wire takes: numbers (numpy and torch
        scalars as plain floats), None, bools and strings of up to MAX_TEXT_CHARS (a
        categorical key, e.g. `optim/update_outcome`); anything else is left out, counted
        and named in the ledger."""
        e = self.e
        clean: dict[str, Any] = {}
        for key, value in metrics.items():
            if key not in self.valid_keys:
                try:
                    check_key(key, "metrics")
                except ProtocolError as exc:
                    e.counts["invalid_values"] += 1
                    e.c.ledger.add("invalid key", f"step {step}: metric {key!r:.80}", 1,
                                   exc.message)
                    e.warn_once(("key", exc.code), "telescope: step metric left out: %s",
                                exc.message)
                    continue
                if len(self.valid_keys) < 100_000:
                    self.valid_keys.add(key)
            kind = type(value)
            if value is None or kind is float or kind is int or kind is bool:
                clean[key] = value
                continue
            if isinstance(value, str):  # a categorical key (numpy str_ too)
                if len(value) <= MAX_TEXT_CHARS and _CONTROL.isdisjoint(value):
                    clean[key] = str(value)
                else:
                    self.left_out(step, key, f"a string of {len(value)} characters (the limit "
                                  f"is {MAX_TEXT_CHARS}) or with control characters")
                continue
            try:
                clean[key] = float(value)  # numpy / torch scalars
            except (TypeError, ValueError):
                self.left_out(step, key, f"not a number, bool or string "
                              f"({type(value).__name__})")
        return clean

    def left_out(self, step: int, key: str, why: str) -> None:
        e = self.e
        e.counts["invalid_values"] += 1
        e.c.ledger.add("invalid value", f"step {step}: metric {key!r}", 1, why)
        e.warn_once(("value", key), "telescope: step metric %r left out: %s", key, why)

    # ---------------------------------------------------------------- samples

    def add_samples(self, entry: tuple[Any, ...], out: list[Outgoing]) -> None:
        problems: list[str] = []
        try:
            if entry[0] == SAMPLES:
                _, step, sid, gid, reward, env, metrics, optional, t = entry
                columns = dict(zip(OPTIONAL_COLUMNS, optional, strict=True))
            else:
                _, step, results, sid, gid, env, columns, t = entry
                reward, metrics = results_to_columns(results)
            chunk = make_chunk(step, sid, gid, reward, env, metrics, columns, t, problems)
        except Exception as exc:  # noqa: BLE001 - any failure converting caller data
            key = str(exc).split(":")[0] if isinstance(exc, SampleError) else type(exc).__name__
            self.invalid(key, f"log_samples: {type(exc).__name__}: {exc}")
            return
        finally:
            for p in problems:
                self.e.counts["invalid_values"] += 1
                self.e.c.ledger.add("invalid column", f"log_samples(step {step!r:.40})", 1, p)
                self.e.warn_once(("column", p.split(":")[0]), "telescope: log_samples: %s", p)
        if self.dedupe:
            kept = self.drop_replayed(chunk)
            if kept is None:
                return
            chunk = kept
        top = chunk.step if isinstance(chunk.step, int) else int(chunk.step.max())
        self.max_step = max(self.max_step, top)
        for batch in self.e.batcher.add(chunk, time.monotonic()):
            self.seal_batch(batch, out)

    @property
    def record_idents(self) -> bool:
        """Keep which samples were sealed (for a later resume of this run)."""
        spool = self.e.spool
        return self.o.dedupe_steps > 0 and spool is not None and spool.path is not None

    @property
    def dedupe(self) -> bool:
        """Leave out samples this run's previous process sealed: only when resuming."""
        return self.e.c.resume and self.record_idents

    def drop_replayed(self, chunk: SampleChunk) -> SampleChunk | None:
        """Leave out samples an earlier incarnation of this outbox already sealed."""
        prev = self.e.spool.prev_max_step if self.e.spool else None
        low = chunk.step if isinstance(chunk.step, int) else int(chunk.step.min())
        if prev is None or low > prev:
            return chunk
        keep = np.fromiter((step > prev or key not in self.previous_keys(step)
                            for step, key in chunk.identities()), dtype=bool, count=chunk.n)
        dropped = chunk.n - int(keep.sum())
        if dropped:
            self.e.counts["deduped_samples"] += dropped
            self.e.warn_once("dedupe", "telescope: resuming run %r: left out %d samples of "
                             "step %d that this run's previous process already logged (they "
                             "are stored once; stats['deduped_samples'] counts them all)",
                             self.e.c.run, dropped, low)
        if dropped == chunk.n:
            return None
        return chunk if not dropped else chunk.take(keep)

    def previous_keys(self, step: int) -> set[tuple[str, str, str]]:
        spool = self.e.spool
        if step not in self.prev_keys:
            assert spool is not None and spool.prev_max_step is not None
            if len(self.prev_keys) > 4096:
                self.prev_keys.clear()
            hi = min(step + 255, spool.prev_max_step)
            loaded = spool.previous_keys(step, hi)
            for s in range(step, hi + 1):
                self.prev_keys[s] = loaded.get(s, set())
        return self.prev_keys[step]

    # ---------------------------------------------------------------- sealing and writing

    def seal_pending(self, out: list[Outgoing]) -> None:
        if self.e.batcher.chunks:
            self.seal_batch(self.e.batcher.seal(), out)

    def seal_batch(self, batch: Batch, out: list[Outgoing]) -> None:
        ident = identity_record(batch.fields) if self.record_idents else None
        self.seal_message({"type": "samples", **batch.fields}, out, batch.n, ident)
        self.e.counts["logged_samples"] += batch.n

    def seal_message(self, fields_: dict[str, Any], out: list[Outgoing], n: int = 0,
                     ident: tuple[int, int, bytes] | None = None) -> None:
        mid = f"{self.prefix}-{next(self.counter)}"
        msg = {"v": VERSION, "id": mid, "run": self.e.c.run,
               "incarnation": self.e.incarnation, **fields_}
        body = spool_mod.encode(msg, self.o.encoding)
        out.append(Outgoing(mid, msg["type"], n, self.o.encoding, body, ident))
        self.since_barrier += 1

    def invalid(self, key: str, message: str) -> None:
        self.e.counts["invalid_calls"] += 1
        self.e.c.ledger.add("invalid call", message.split(":")[0], 1, message)
        self.e.warn_once(("invalid", key), "telescope: %s (dropped; counted in stats, logged "
                         "once)", message)

    def write(self, out: list[Outgoing]) -> bool:
        """Append sealed messages to the outbox; False when they had to be dropped."""
        e = self.e
        if not out:
            return True
        assert e.spool is not None
        if e.spool.bytes > self.o.max_spool_bytes:
            e.counts["dropped_spool_full"] += len(out)
            for m in out:
                e.c.ledger.add("outbox full", f"a {m.kind} message ({m.n} samples)" if m.n
                               else f"a {m.kind} message", m.n or 1,
                               f"the outbox holds more than max_spool_bytes="
                               f"{self.o.max_spool_bytes} unacknowledged bytes")
            e.warn_once("spool_full", "telescope: the outbox holds more than %d bytes "
                        "(max_spool_bytes); dropping new messages", self.o.max_spool_bytes)
            return False
        try:
            e.spool.append(out)
        except (sqlite3.Error, OSError) as exc:
            self.to_memory(out, exc)
        self.appends += 1
        if self.appends % 200 == 0 and self.record_idents:
            self.prune()
        e.send_event.set()
        return True

    def to_memory(self, out: list[Outgoing], exc: Exception) -> None:
        """The outbox file failed (disk full?): carry on with an in-memory outbox."""
        e = self.e
        e.counts["spool_errors"] += 1
        log.error("telescope: writing the outbox failed (%s); continuing in memory only", exc)
        old, e.spool = e.spool, spool_mod.Spool(None)
        e.spool.incarnation = e.incarnation
        try:
            rows = old.pending(0, 1 << 62) if old else []
            if old:
                old.close()
        except sqlite3.Error:
            rows = []
        e.spool.append([Outgoing(r.msg_id, r.kind, r.n, r.fmt, r.body) for r in rows] + out)
        e.connection.forget_in_flight()
        for w in e.flush_waiters:
            w.target = e.spool.last_seq

    def prune(self) -> None:
        try:
            assert self.e.spool is not None
            self.e.spool.prune_keys(self.max_step - self.o.dedupe_steps)
        except sqlite3.Error as exc:
            self.e.warn_once("prune", "telescope: outbox pruning failed: %s", exc)


def step_number(step: Any) -> int:
    """`step` as a wire step number (an integer in [0, 2^63)); raises for anything else."""
    if isinstance(step, (bool, float, str)):
        raise TypeError(f"step {step!r} is not an integer")
    value = operator.index(step)
    if value < 0 or value >= 2**63:
        raise ValueError(f"step {value} is out of range")
    return value
