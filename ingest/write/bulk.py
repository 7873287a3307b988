"""Consecutive step messages of one run in a batch, written as one: the fast path of the
message rate.

A batch frame from `trainer_hooks` is mostly `step` messages of one run. Applied one by one,
each costs its own savepoint, run lookup and lock, id claim, series lookup, point insert and run
update — about ten statements for forty numbers. Here a run of consecutive plain numeric step
messages (no string, null or non-finite value, no value left out, one run and incarnation) is
written with one of each: the run resolved and locked once, the ids claimed in one statement,
every point in one insert under one sequence number (the batch is one commit anyway). Replies
are what each message alone would get: an ack, or an ack with `duplicate` for an id the run has
applied (or that came earlier in the batch). Anything unusual — a key that holds strings, a value
the database refuses — raises `Fallback` inside the group's savepoint, and the caller applies
the group message by message instead, so the rules stay those of `ingest.write.store`.
"""

from __future__ import annotations

import time
from typing import Any, TypeGuard

from django.db import DataError, transaction

from ingest.core import categorical
from ingest.core.commit import Outcome, PointWriter, publish_series_pks
from ingest.core.series_ids import series_id
from ingest.write import steps
from ingest.write.runs import forget_locked, resolve_run
from trainer_hooks.wire import protocol as p

MIN_GROUP = 2  # fewer consecutive step messages gain nothing over the one-by-one path


class Fallback(Exception):
    """The group needs the message-by-message path."""


def eligible(msg: Any) -> TypeGuard[p.Step]:
    """A plain numeric step message."""
    return (isinstance(msg, p.Step) and not msg.text and not msg.nonfinite
            and not msg.left_out)


def group_end(msgs: list[Any], i: int) -> int:
    """Where the run of eligible step messages of one run (name and incarnation) that starts
    at `i` ends (i + 1 when msgs[i] is not eligible)."""
    first, j = msgs[i], i + 1
    if eligible(first):
        while j < len(msgs):
            nxt = msgs[j]
            if not (eligible(nxt) and nxt.run == first.run
                    and nxt.incarnation == first.incarnation):
                break
            j += 1
    return j


def apply_steps(project_id: int, msgs: list[p.Step],
                created: dict[tuple[int, str], int]) -> list[Outcome]:
    """Write eligible step messages of one run as one (in the caller's transaction); raises
    Fallback (having rolled its savepoint back) when the group needs the slow path."""
    before = dict(created)
    try:
        with transaction.atomic():  # a savepoint: nothing of the group stays on Fallback
            return _apply(project_id, msgs, created)
    except (Fallback, DataError) as exc:
        created.clear()
        created.update(before)
        forget_locked()  # the run's row was rolled back with the group
        if isinstance(exc, DataError) and transaction.get_connection().needs_rollback:
            raise
        raise Fallback from exc


def _apply(project_id: int, msgs: list[p.Step],
           created: dict[tuple[int, str], int]) -> list[Outcome]:
    run = resolve_run(project_id, msgs[0]).run
    fresh = _claim(run.pk, msgs)
    writer = PointWriter(run, created)
    keys = list(dict.fromkeys(k for m in msgs if fresh[m.id] is m for k in m.metrics))
    pks = writer.series_pks([("step", k, None, None) for k in keys])
    if any(categorical.kinds(pks).values()):
        raise Fallback("a key of the group holds strings")
    pk_of = dict(zip(keys, pks, strict=True))
    now = time.time()
    applied = [m for m in msgs if fresh[m.id] is m]
    steps.add_numeric(writer, [(m.step, steps.point_time(m.time, now),
                                [pk_of[k] for k in m.metrics], list(m.metrics.values()))
                               for m in applied],
                      {pk_of[k]: series_id("step", k) for k in keys})
    first = next((m for m in msgs if fresh[m.id] is m), None)
    outcome = writer.finish(first.id if first else msgs[0].id, run_created=False)
    publish_series_pks(created)
    out = []
    for m in msgs:
        if fresh[m.id] is not m:
            out.append(Outcome({"type": "ack", "id": m.id, "duplicate": True}, run_id=run.pk))
        elif m is first:
            out.append(outcome)
        else:
            out.append(Outcome({"type": "ack", "id": m.id}, run_id=run.pk))
    return out


def _claim(run_id: int, msgs: list[p.Step]) -> dict[str, p.Step | None]:
    """{id: the message that applies it, or None when the run applied it before}: a repeated
    id applies once, the first time (`steps.claim`)."""
    new = steps.claim(run_id, [m.id for m in msgs])
    fresh: dict[str, p.Step | None] = {}
    for m in msgs:
        if m.id not in fresh:
            fresh[m.id] = m if m.id in new else None
    return fresh
