"""The pump: the caller's queued `log_*` calls → validated, sealed messages in the outbox.

Runs on the sender thread (`engine.SenderEngine`). Step metrics are checked key by key (a bad
key or value is left out and counted); samples are converted to columns (`samples`), batched
(`batching`) and sealed at the latest `flush_interval` after the first sample waited. Every
sealed message gets its unique id (`<12 hex of a uuid4>-<counter>`), carries the client's run
incarnation and is entered in the outbox before the connection may send it (its body kept in
memory by a staged outbox until the engine spills it, `outbox`). When the client
resumes its run, samples an earlier process of the same outbox already sealed are left out
(`resume.ResumeFilter`). Every value not stored goes to the ledger with its reason.

The sealer only reads the call queue and writes the outbox; what the pass means for the flush
and sync callers it returns to the engine (`Pumped`).
"""

from __future__ import annotations

import itertools
import operator
import sqlite3
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from trainer_hooks.rewards.result import results_to_columns
from trainer_hooks.transport.batching import Batch, SampleBatcher
from trainer_hooks.transport.bookkeeping import Bookkeeping
from trainer_hooks.transport.options import SenderOptions
from trainer_hooks.transport.outbox import Outbox, Outgoing
from trainer_hooks.transport.queue import (
    Call,
    CallQueue,
    ControlCall,
    FlushCall,
    RewardsCall,
    SamplesCall,
    StepCall,
    SyncCall,
    Waiter,
)
from trainer_hooks.transport.resume import ResumeFilter
from trainer_hooks.transport.samples import SampleError, make_chunk
from trainer_hooks.wire.protocol import (
    MAX_METRICS_PER_MESSAGE,
    MAX_TEXT_CHARS,
    MAX_UNIX_SECONDS,
    OPTIONAL_COLUMNS,
    VERSION,
    ProtocolError,
    check_key,
    encode,
)
from trainer_hooks.wire.schema import deceptive

PUMP_BATCH = 2000  # entries handled per pump pass at most, so acks keep flowing under a flood
# ... and a pass ends after this long, so the connection sends what is sealed while the caller
# is still logging (a flood of calls was all sealed before its first message left: measured
# ~1 s of 2,000 steps' messages with nothing on the wire).
PUMP_SECONDS = 0.02
PUMP_TAKE = 32  # entries taken from the queue at a time within a pass


@dataclass
class Pumped:
    """One pump pass: `stop` (the client closed), `written` (messages added to the outbox),
    `stored` (False when sealed messages had to be dropped: the outbox was full), the syncs to
    resolve with `stored` and the flushes to wait for everything now in the outbox."""

    stop: bool = False
    written: int = 0
    stored: bool = True
    syncs: list[Waiter] = field(default_factory=list)
    flushes: list[Waiter] = field(default_factory=list)


class Sealer:
    """Turns the entries of `calls` into messages of `run` in `outbox`."""

    def __init__(self, options: SenderOptions, calls: CallQueue, outbox: Outbox,
                 batcher: SampleBatcher, resume: ResumeFilter, books: Bookkeeping, *,
                 run: str, incarnation: str) -> None:
        self.options = options
        self.calls = calls
        self.outbox = outbox
        self.batcher = batcher
        self.resume = resume
        self.books = books
        self.run = run
        self.incarnation = incarnation
        self.id_prefix = uuid.uuid4().hex[:12]
        self.id_counter = itertools.count()
        self.valid_keys: set[str] = set()
        # label lists dictionary-encoded (a lookup per sample) only by a helper process, whose
        # CPU is not the trainer's: on the trainer's own sender thread it cost more than
        # packing the strings (`samples._local_codes`); a call's one value for all always is
        self.code_lists = options.sender == "process"
        self.since_barrier = outbox.rows  # messages sealed since the last barrier (replays too)

    def pump_once(self) -> Pumped:
        """Seal what the callers queued (at most PUMP_BATCH entries, for about PUMP_SECONDS)
        into the outbox."""
        out: list[Outgoing] = []
        pumped = Pumped()
        deadline = time.monotonic() + PUMP_SECONDS
        taken = 0
        while taken < PUMP_BATCH and not pumped.stop:
            entries = self.calls.take(min(PUMP_TAKE, PUMP_BATCH - taken))
            if not entries:
                break
            taken += len(entries)
            for entry in entries:
                try:
                    pumped.stop = self.seal_entry(entry, out, pumped) or pumped.stop
                except Exception as exc:  # noqa: BLE001 - one bad entry must not stop it
                    self.books.count("internal_errors")
                    self.books.warn_once(("internal", type(exc)), "telescope: sender error: "
                                         "%r", exc)
            if time.monotonic() >= deadline:
                break
        # sealed at most flush_interval after the first sample, whatever the poll phase
        options = self.options
        if self.batcher.due(time.monotonic(), options.flush_interval - options.poll_interval):
            self.seal_pending(out)
        pumped.stored = self.write(out)
        pumped.written = len(out) if pumped.stored else 0
        return pumped

    def seal_entry(self, call: Call, out: list[Outgoing], pumped: Pumped) -> bool:
        """Handle one queued call; True for `StopCall`."""
        if isinstance(call, StepCall):
            self.seal_step(call, out)
            return False
        if isinstance(call, (SamplesCall, RewardsCall)):
            self.add_samples(call, out)
            return False
        self.seal_pending(out)
        if isinstance(call, ControlCall):
            if call.message["type"] == "barrier":
                if not self.since_barrier:
                    return False  # nothing sealed since the last one: nothing to wait for
                self.since_barrier = -1
            self.seal_message(call.message, out)
        elif isinstance(call, FlushCall):
            pumped.flushes.append(call.waiter)
        elif isinstance(call, SyncCall):
            pumped.syncs.append(call.waiter)
        else:  # StopCall
            return True
        return False

    # ---------------------------------------------------------------- steps

    def seal_step(self, call: StepCall, out: list[Outgoing]) -> None:
        metrics, t = call.metrics, call.time
        try:
            step = step_number(call.step)
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
        self.books.count("logged_steps")

    def clean_metrics(self, step: int, metrics: dict[str, Any]) -> dict[str, Any]:
        """The metrics with valid keys and values the wire takes: numbers (numpy and torch
        scalars as plain floats), None, bools and strings of up to MAX_TEXT_CHARS (a
        categorical key, e.g. `optim/update_outcome`); anything else is left out, counted
        and named in the ledger."""
        clean: dict[str, Any] = {}
        for key, value in metrics.items():
            if key not in self.valid_keys:
                try:
                    check_key(key, "metrics")
                except ProtocolError as exc:
                    self.books.count("invalid_values")
                    self.books.ledger.add("invalid key", f"step {step}: metric {key!r:.80}", 1,
                                          exc.message)
                    self.books.warn_once(("key", exc.code), "telescope: step metric left out: "
                                         "%s", exc.message)
                    continue
                if len(self.valid_keys) < 100_000:
                    self.valid_keys.add(key)
            kind = type(value)
            if value is None or kind is float or kind is int or kind is bool:
                clean[key] = value
                continue
            if isinstance(value, str):  # a categorical key (numpy str_ too)
                if len(value) <= MAX_TEXT_CHARS and deceptive(value) is None:
                    clean[key] = str(value)
                else:
                    self.left_out(step, key, f"a string of {len(value)} characters (the limit "
                                  f"is {MAX_TEXT_CHARS}) or with control or invisible "
                                  "characters")
                continue
            try:
                clean[key] = float(value)  # numpy / torch scalars
            except (TypeError, ValueError):
                self.left_out(step, key, f"not a number, bool or string "
                              f"({type(value).__name__})")
        return clean

    def left_out(self, step: int, key: str, why: str) -> None:
        self.books.count("invalid_values")
        self.books.ledger.add("invalid value", f"step {step}: metric {key!r}", 1, why)
        self.books.warn_once(("value", key), "telescope: step metric %r left out: %s", key, why)

    # ---------------------------------------------------------------- samples

    def add_samples(self, call: SamplesCall | RewardsCall, out: list[Outgoing]) -> None:
        """A `log_samples` or `log_rewards` call → a validated chunk → the batcher (sealing the
        batches it completes)."""
        problems: list[str] = []
        step = call.step
        try:
            if isinstance(call, SamplesCall):
                reward, metrics = call.reward, call.metrics
                columns = {name: getattr(call, name) for name in OPTIONAL_COLUMNS}
            else:
                reward, metrics = results_to_columns(call.results)
                columns = call.columns
            chunk = make_chunk(step, call.sample_id, call.group_id, reward, call.env, metrics,
                               columns, call.time, problems, code_lists=self.code_lists)
        except Exception as exc:  # noqa: BLE001 - any failure converting caller data
            key = str(exc).split(":")[0] if isinstance(exc, SampleError) else type(exc).__name__
            self.invalid(key, f"log_samples: {type(exc).__name__}: {exc}")
            return
        finally:
            for p in problems:
                self.books.count("invalid_values")
                self.books.ledger.add("invalid column", f"log_samples(step {step!r:.40})", 1, p)
                self.books.warn_once(("column", p.split(":")[0]), "telescope: log_samples: %s",
                                     p)
        admitted = self.resume.admit(chunk)
        if admitted is not None:
            for batch in self.batcher.add(admitted, time.monotonic()):
                self.seal_batch(batch, out)

    # ---------------------------------------------------------------- sealing and writing

    def seal_pending(self, out: list[Outgoing]) -> None:
        if self.batcher.chunks:
            self.seal_batch(self.batcher.seal(), out)

    def seal_batch(self, batch: Batch, out: list[Outgoing]) -> None:
        """A batch as a `samples` message, its label columns dictionary-encoded where the
        batcher made them so (`Batch.coded`)."""
        self.seal_message({"type": "samples", **batch.fields, **batch.coded}, out, batch.n,
                          self.resume.identity(batch.fields))
        self.books.count("logged_samples", batch.n)

    def seal_message(self, fields_: dict[str, Any], out: list[Outgoing], n: int = 0,
                     ident: tuple[int, int, bytes] | None = None) -> None:
        mid = f"{self.id_prefix}-{next(self.id_counter)}"
        msg = {"v": VERSION, "id": mid, "run": self.run, "incarnation": self.incarnation,
               **fields_}
        fmt = self.options.encoding
        out.append(Outgoing(mid, msg["type"], n, fmt, encode(msg, fmt), ident))
        self.since_barrier += 1

    def invalid(self, key: str, message: str) -> None:
        self.books.count("invalid_calls")
        self.books.ledger.add("invalid call", message.split(":")[0], 1, message)
        self.books.warn_once(("invalid", key), "telescope: %s (dropped; counted in stats, "
                             "logged once)", message)

    def write(self, out: list[Outgoing]) -> bool:
        """Append sealed messages to the outbox; False when they had to be dropped."""
        if not out:
            return True
        limit = self.options.max_spool_bytes
        if self.outbox.bytes > limit:
            self.books.count("dropped_spool_full", len(out))
            for m in out:
                self.books.ledger.add(
                    "outbox full", f"a {m.kind} message ({m.n} samples)" if m.n
                    else f"a {m.kind} message", m.n or 1,
                    f"the outbox holds more than max_spool_bytes={limit} unacknowledged bytes")
            self.books.warn_once("spool_full", "telescope: the outbox holds more than %d bytes "
                                 "(max_spool_bytes); dropping new messages", limit)
            return False
        try:
            self.outbox.append(out)
        except (sqlite3.Error, OSError) as exc:
            self.books.count("spool_errors")
            self.outbox.move_to_memory(exc)
            self.outbox.append(out)
        self.resume.written()
        return True


def step_number(step: Any) -> int:
    """`step` as a wire step number (an integer in [0, 2^63)); raises for anything else."""
    if isinstance(step, (bool, float, str)):
        raise TypeError(f"step {step!r} is not an integer")
    value = operator.index(step)
    if value < 0 or value >= 2**63:
        raise ValueError(f"step {value} is out of range")
    return value
