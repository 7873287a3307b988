"""Which run a message belongs to (docs/protocol.md "Runs, experiments and incarnations");
its row lock is ingest.core.commit.lock_run.

A message names a run (`run`, its *wire name*) and, from `trainer_hooks`, carries the client's
`incarnation`: an id for one run attempt. The rules, applied in the message's transaction:

1. An incarnation that a `run.start` has opened before → that run (whatever it is called now),
   so a trainer's messages and their replays never land anywhere else.
2. A `run.start` otherwise looks at the newest run with that wire name:
   - none → a new run;
   - `resume: true` → that run;
   - it has data (a step or samples) and was itself opened by a `run.start` → a **new run**
     with the same wire name, shown as `<name>-2` (`-3`, …): a new experiment never merges
     into an earlier one's steps;
   - else (empty, or fed only by reward workers / raw messages) → that run.
   The incarnation is then pinned to the chosen run. A `run.start` whose id the run has
   already applied (a resend whose ack was lost) resolves to that run.
3. Any other message → the newest run with that wire name, created when there is none (reward
   workers that join a run follow its newest experiment).

`resolve_run` locks the chosen run's row (`SELECT … FOR UPDATE`), which serializes the writers
of one run across server processes. Within `locked_runs()` (one transaction: a group of frames,
`ingest.write.frames`) a run that step and samples messages reach by their incarnation is found
and locked once, and its row object handed to the next such messages: the lock lasts the
transaction, and what those messages change of the row they write back themselves
(`PointWriter.finish`), so the object is the row. Any other message that writes (a run.start,
a run.end, a heartbeat, ...) and any message undone in its savepoint (`forget_locked`) make
the next one look again.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime

from django.db import connection

from ingest.core.commit import lock_run
from ingest.models import Run
from trainer_hooks.wire import protocol as p

MAX_SUFFIX = 10_000


@dataclass
class Resolved:
    run: Run
    created: bool  # this message created the run
    renamed: bool  # a run.start that found earlier data under its name got a new run


_LOCAL = threading.local()  # .runs: {(project, incarnation): Run} inside `locked_runs`


@contextmanager
def locked_runs() -> Iterator[None]:
    """Reuse the runs step and samples messages lock, for one transaction (module docstring)."""
    _LOCAL.runs = {}
    try:
        yield
    finally:
        _LOCAL.runs = None


def forget_locked() -> None:
    """A message's changes were rolled back (its savepoint): the row objects may hold
    changes the database no longer has, so they are read again."""
    runs = getattr(_LOCAL, "runs", None)
    if runs:
        runs.clear()


def resolve_run(project_id: int, msg: p.AnyMessage) -> Resolved:
    """Find (or create) and lock the run `msg` belongs to; see the module docstring."""
    runs: dict[tuple[int, str], Run] | None = getattr(_LOCAL, "runs", None)
    if runs is not None and not isinstance(msg, (p.Step, p.Samples)):
        runs.clear()  # what this message does to its run, the objects would not know
        runs = None
    if msg.incarnation is not None:
        key = (project_id, msg.incarnation)
        if runs is not None and key in runs:
            return Resolved(runs[key], False, False)
        pk = _pinned(project_id, msg.incarnation)
        if pk is not None:
            run = _locked(pk)
            if runs is not None:
                runs[key] = run
            return Resolved(run, False, False)
    if isinstance(msg, p.RunStart):
        return _resolve_start(project_id, msg)
    pk = _newest(project_id, msg.run)
    if pk is not None:
        return Resolved(_locked(pk), False, False)
    pk, created = _create(project_id, msg.run, adopt=True)
    return Resolved(_locked(pk), created, False)


def find_run(project_id: int, msg: p.AnyMessage) -> int | None:
    """The run `msg` would reach, without creating or locking anything (for a barrier)."""
    if msg.incarnation is not None:
        pk = _pinned(project_id, msg.incarnation)
        if pk is not None:
            return pk
    return _newest(project_id, msg.run)


def _resolve_start(project_id: int, msg: p.RunStart) -> Resolved:
    newest = _newest(project_id, msg.run)
    created = renamed = False
    if newest is None:
        pk, created = _create(project_id, msg.run, adopt=True)
    elif msg.resume or _applied(newest, msg.id) or not _has_earlier_experiment(newest):
        pk = newest
    else:
        pk, created = _create(project_id, msg.run, adopt=False)
        renamed = True
    run = _locked(pk)
    with connection.cursor() as cur:
        if not run.started:
            cur.execute("UPDATE ingest_run SET started = %s WHERE id = %s", [True, pk])
            run.started = True
        if msg.incarnation is not None:
            cur.execute("INSERT INTO ingest_runincarnation (project_id, uid, run_id)"
                        " VALUES (%s, %s, %s) ON CONFLICT (project_id, uid) DO NOTHING",
                        [project_id, msg.incarnation, pk])
    return Resolved(run, created, renamed)


def _pinned(project_id: int, incarnation: str) -> int | None:
    with connection.cursor() as cur:
        cur.execute("SELECT run_id FROM ingest_runincarnation WHERE project_id = %s"
                    " AND uid = %s", [project_id, incarnation])
        row = cur.fetchone()
    return None if row is None else int(row[0])


def _newest(project_id: int, wire_name: str) -> int | None:
    with connection.cursor() as cur:
        cur.execute("SELECT max(id) FROM ingest_run WHERE project_id = %s AND wire_name = %s",
                    [project_id, wire_name])
        row = cur.fetchone()
    return None if row is None or row[0] is None else int(row[0])


def _applied(run_id: int, msg_id: str) -> bool:
    with connection.cursor() as cur:
        cur.execute("SELECT 1 FROM ingest_ingestedmessage WHERE run_id = %s AND msg_id = %s",
                    [run_id, msg_id])
        return cur.fetchone() is not None


def _has_earlier_experiment(run_id: int) -> bool:
    with connection.cursor() as cur:
        cur.execute("SELECT started, last_step FROM ingest_run WHERE id = %s", [run_id])
        started, last_step = cur.fetchone()
    return bool(started) and last_step is not None


def _create(project_id: int, wire_name: str, *, adopt: bool) -> tuple[int, bool]:
    """Insert a run for `wire_name`, shown as the first free of `wire_name` (unless a new
    experiment), `wire_name-2`, `-3`, …. With `adopt`, a run another process created for this
    wire name meanwhile is used instead. Returns (pk, created)."""
    now = datetime.now(UTC)
    color = _free_color(project_id)
    names = ([wire_name] if adopt else []) + [
        f"{wire_name[:190]}-{k}" for k in range(2, MAX_SUFFIX)]
    for name in names:
        with connection.cursor() as cur:
            cur.execute(
                "INSERT INTO ingest_run (project_id, name, wire_name, started, status,"
                " started_at, updated_at, color, seq, notes) VALUES (%s, %s, %s, %s, 'running',"
                " %s, %s, %s, 0, '') ON CONFLICT (project_id, name) DO NOTHING",
                [project_id, name, wire_name, False, now, now, color])
            if cur.rowcount == 1:
                cur.execute("SELECT id FROM ingest_run WHERE project_id = %s AND name = %s",
                            [project_id, name])
                return int(cur.fetchone()[0]), True
        if adopt:
            pk = _newest(project_id, wire_name)
            if pk is not None:
                return pk, False
    raise RuntimeError(f"no free run name for {wire_name!r}")


# 16 colours, distinct and readable on light and dark backgrounds (Tableau 10, then 6 more).
PALETTE = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1",
           "#ff9da7", "#9c755f", "#bab0ac", "#1f77b4", "#d62728", "#2ca02c", "#9467bd",
           "#17becf", "#bcbd22")


def _free_color(project_id: int) -> str:
    """The first palette colour no run of the project has; when all are taken, the one
    fewest runs have."""
    with connection.cursor() as cur:
        cur.execute("SELECT color, COUNT(*) FROM ingest_run WHERE project_id = %s GROUP BY color",
                    [project_id])
        used = dict(cur.fetchall())
    return min(PALETTE, key=lambda c: (used.get(c, 0), PALETTE.index(c)))


def _locked(pk: int) -> Run:
    """`lock_run` of a run found (or created) in this transaction."""
    run = lock_run(pk)
    assert run is not None
    return run




