"""The one decode → validate → store path shared by the WebSocket consumer and HTTP endpoint.

A frame (or HTTP body) holds one message or a list of them (a batch). Each message of a batch
is validated and applied as if sent alone — its own savepoint, its own ack or error — but the
batch commits once, so a batch of many small messages costs one commit, not one each.

Everything that follows from a message alone — its decoding, its validation, a samples
message's stored batches and observed ranges (`store.prepare`) — is done before its
transaction begins: the write lock (SQLite's, which the pipeline's worker shares; a run's row
lock on PostgreSQL) is held only while the database is written.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import DataError, transaction

from ingest.core.commit import Outcome
from ingest.write import bulk, liveness
from ingest.write.runs import find_run, forget_locked, locked_runs
from ingest.write.store import Prepared, apply_message, prepare
from trainer_hooks.wire import protocol as p

MAX_BATCH_MESSAGES = 1000
# A message validated and prepared (`store.prepare`) for its transaction, or its error reply.
Ready = tuple[p.AnyMessage, Prepared | None] | Outcome
log = logging.getLogger("ingest.write.frames")


def _validate(obj: Any) -> p.AnyMessage | Outcome:
    """The typed message, or the error reply of a bad one."""
    try:
        return p.validate_message(obj)
    except p.ProtocolError as exc:
        return Outcome(exc.as_reply(p.message_id(obj)))


def _ready(obj: Any) -> Ready:
    """A decoded message validated and prepared, or the error reply of a bad one."""
    msg = _validate(obj)
    return msg if isinstance(msg, Outcome) else (msg, prepare(msg))


def _ready_batch(objs: list[Any]) -> list[Ready]:
    """A batch's messages, each `_ready`, or each the error of a batch too long."""
    if len(objs) > MAX_BATCH_MESSAGES:
        err = p.ProtocolError("too_many", None, f"a batch holds {len(objs)} messages; the "
                              f"limit is {MAX_BATCH_MESSAGES}")
        return [Outcome(err.as_reply(p.message_id(o))) for o in objs]
    return [_ready(o) for o in objs]


def handle_object(project_id: int, obj: Any,
                  created: dict[tuple[int, str], int] | None = None) -> Outcome:
    """Validate and store one decoded message; a bad one gets an error reply and writes
    nothing."""
    ready = _ready(obj)
    return ready if isinstance(ready, Outcome) else _apply(project_id, ready, created)


def _apply(project_id: int, ready: tuple[p.AnyMessage, Prepared | None],
           created: dict[tuple[int, str], int] | None) -> Outcome:
    msg, prepared = ready
    if isinstance(msg, p.Barrier):
        # Stores nothing (and creates no run); the transport acks once `aggregated` holds.
        return Outcome({"type": "ack", "id": msg.id}, run_id=find_run(project_id, msg),
                       barrier=True)
    if isinstance(msg, p.Heartbeat):  # stores nothing but the run's last-seen time
        forget_locked()  # (which it writes behind the row objects of runs.locked_runs)
        return Outcome({"type": "ack", "id": msg.id}, run_id=liveness.heartbeat(project_id, msg))
    before = None if created is None else dict(created)
    try:
        with transaction.atomic():  # a savepoint inside a batch
            return apply_message(project_id, msg, created, prepared)
    except (DataError, p.ProtocolError) as exc:  # a value the database cannot hold, or packed
        # text found bad while the message was stored (wire check_text): its fault alone
        forget_locked()  # its run's row was rolled back with it
        if created is not None and before is not None:  # its series were rolled back too
            created.clear()
            created.update(before)
        if transaction.get_connection().needs_rollback:
            raise  # the batch's transaction is broken: let the caller fail it whole
        if isinstance(exc, p.ProtocolError):
            return Outcome(exc.as_reply(msg.id))
        return Outcome(_unstorable(exc).as_reply(msg.id))
    # Any other database error (connection lost, locked, disk full, ...) propagates: the
    # transport answers it as retryable (close 4500 on a WebSocket, HTTP 503) and the client
    # sends the frame again.


def _unstorable(exc: DataError) -> p.ProtocolError:
    """The error a client gets for a value its database refused: the database's first line
    only (PostgreSQL's next lines quote the statement: `LINE 1: INSERT ...`); the whole of
    it goes to the server log."""
    log.warning("ingest: a message not stored, its value refused by the database: %s", exc)
    first = (str(exc).strip().splitlines() or ["the database refused a value"])[0]
    return p.ProtocolError("unstorable", None, f"not stored: {first[:200]}")


def handle_objects(project_id: int, objs: list[Any]) -> list[Outcome]:
    """Apply a batch in one transaction; one outcome per message, in order."""
    readies = _ready_batch(objs)
    with transaction.atomic(), locked_runs():
        return _apply_batch(project_id, readies, {})


def _apply_batch(project_id: int, readies: list[Ready],
                 created: dict[tuple[int, str], int]) -> list[Outcome]:
    """A batch's ready messages, in the caller's transaction (each with its own savepoint;
    consecutive plain step messages of one run written together)."""
    msgs = [r if isinstance(r, Outcome) else r[0] for r in readies]
    out: list[Outcome] = []
    i = 0
    while i < len(msgs):
        j = bulk.group_end(msgs, i)  # consecutive plain step messages of one run: together
        if j - i >= bulk.MIN_GROUP:
            try:
                out += bulk.apply_steps(project_id,
                                        [m for m in msgs[i:j] if bulk.eligible(m)], created)
                i = j
                continue
            except bulk.Fallback:
                pass  # nothing of the group was written: one by one below
        for ready in readies[i:j]:
            out.append(ready if isinstance(ready, Outcome) else _apply(project_id, ready, created))
        i = j
    return out


def handle_frames(project_id: int, frames: list[tuple[bytes | str, bool]]
                  ) -> list[tuple[list[Outcome], bool]]:
    """Decode and apply frames that arrived one after another on a connection, in ONE
    transaction (group commit: one commit for all of them); per frame its outcomes and whether
    it was a batch. Each message is still applied as if alone (its own savepoint, ack or
    error); a database failure fails them all, unacknowledged, for the client to resend."""
    decoded: list[tuple[list[Ready], bool]] = []  # each frame's messages, and if a batch
    for data, binary in frames:
        try:
            obj = p.decode_frame(data, binary=binary)
        except p.ProtocolError as exc:
            decoded.append(([Outcome(exc.as_reply())], False))
            continue
        batch = isinstance(obj, list)
        decoded.append((_ready_batch(obj) if batch else [_ready(obj)], batch))
    out: list[tuple[list[Outcome], bool]] = []
    created: dict[tuple[int, str], int] = {}
    with transaction.atomic(), locked_runs():
        for readies, batch in decoded:
            if batch:
                out.append((_apply_batch(project_id, readies, created), True))
            else:
                [ready] = readies
                out.append(([ready if isinstance(ready, Outcome)
                             else _apply(project_id, ready, created)], False))
    return out
