"""What one commit of a run writes, on either side: the run's row lock (`lock_run`), its points
(`PointWriter`, one block per commit: ingest.core.pointstore) and what it tells live pages and
the caller (`Outcome`). The write side's messages and the pipeline's aggregation passes both
commit through these, so points are numbered and broadcast one way.
"""

from __future__ import annotations

import time as _time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np
from django.db import connection, transaction

from ingest.core import pointstore, progress
from ingest.core.payloads import catalog_entry, now, run_info
from ingest.core.series_ids import series_id
from ingest.models import Run, Series

# (run_id, sid) -> series pk; filled only after commit so a rolled-back pk never leaks.
_SERIES_PKS: dict[tuple[int, str], int] = {}


@dataclass
class Outcome:
    """What a caller needs after commit: the reply, and what to broadcast."""

    reply: dict[str, Any]
    run_id: int | None = None
    seq: int | None = None
    points: dict[str, dict[str, list[Any]]] = field(default_factory=dict)
    new_series: list[dict[str, Any]] = field(default_factory=list)
    run: dict[str, Any] | None = None
    dirty: bool = False  # steps of the run await re-aggregation
    # Events or gauges of the run committed: the run's event extent (first, last) after it,
    # for live Timeline and Performance pages (ingest.core.broadcast).
    timeline: tuple[float | None, float | None] | None = None
    barrier: bool = False  # ack only once the run's aggregates have caught up (`barrier`)
    # Points written as arrays (an aggregation pass, a group of step messages), with the sid
    # of each series pk among them: turned into the live pages' copy only when some page may
    # be listening (`live_points`), since building it costs more than writing them.
    blocks: list[tuple[pointstore.Block, dict[int, str]]] = field(default_factory=list)

    def point_count(self) -> int:
        return sum(len(p["step"]) for p in self.points.values()) + sum(
            len(b) for b, _ in self.blocks)

    def live_points(self) -> dict[str, dict[str, list[Any]]]:
        """Every point of the outcome per series sid, as live pages get them (NaN: withdrawn,
        sent as null). Each block is grouped with one sort: each column becomes a list once
        and a series takes a slice of it."""
        points = {sid: {k: list(v) for k, v in pt.items()} for sid, pt in self.points.items()}
        for block, sid_of in self.blocks:
            if not len(block):
                continue
            order = np.argsort(block.pk, kind="stable")
            pk = block.pk[order]
            cuts = (np.flatnonzero(pk[1:] != pk[:-1]) + 1).tolist()
            steps, times = block.step[order].tolist(), block.time[order].tolist()
            values = block.value[order].tolist()
            for a, b, series in zip([0, *cuts], [*cuts, len(pk)], pk[[0, *cuts]].tolist(),
                                    strict=True):
                pt = points.setdefault(sid_of[series], {"step": [], "time": [], "value": []})
                pt["step"] += steps[a:b]
                pt["time"] += times[a:b]
                pt["value"] += values[a:b]
        return points


def publish_series_pks(created: dict[tuple[int, str], int]) -> None:
    """Remember series created in the current transaction once it commits."""
    transaction.on_commit(lambda: _SERIES_PKS.update(created))


class PointWriter:
    """Collects the points of one message and writes them with the run's next seq."""

    def __init__(self, run: Run, created: dict[tuple[int, str], int]) -> None:
        self.run = run
        self.created = created
        self.seq = run.seq + 1
        self.points: dict[str, dict[str, list[Any]]] = {}
        self.blocks: list[tuple[pointstore.Block, dict[int, str]]] = []
        self.new_series: list[dict[str, Any]] = []
        self.parts: list[pointstore.Block] = []
        self.n = 0  # points to write
        self.run_changed = False
        self.dirty = False
        self.timeline: tuple[float | None, float | None] | None = None  # see Outcome
        self.left_out: dict[str, str] = {}  # field -> why (reported in the ack)

    def series_pks(self, keys: Iterable[tuple[str, str, str | None, str | None]],
                   categorical: bool = False) -> list[int]:
        """pks of the given (kind, key, stat, env) series, creating the missing ones (as
        categorical series when `categorical`)."""
        keys = list(keys)
        sids = [series_id(*k) for k in keys]
        rid = self.run.pk
        missing = {s: k for s, k in zip(sids, keys, strict=True)
                   if (rid, s) not in _SERIES_PKS and (rid, s) not in self.created}
        if missing:
            self._create_series(missing, categorical)
        return [_SERIES_PKS.get((rid, s)) or self.created[(rid, s)] for s in sids]

    def _create_series(self, missing: dict[str, tuple[str, str, str | None, str | None]],
                       categorical: bool) -> None:
        rid = self.run.pk
        with connection.cursor() as cur:
            cur.executemany(
                "INSERT INTO ingest_series (run_id, sid, kind, key, stat, env, nonfinite_count,"
                " categorical)"
                " VALUES (%s, %s, %s, %s, %s, %s, 0, %s) ON CONFLICT (run_id, sid) DO NOTHING",
                [(rid, s, *k, categorical) for s, k in missing.items()],
            )
        found = Series.objects.filter(run_id=rid, sid__in=list(missing)).values_list("sid", "pk")
        known = {s for (r, s) in _SERIES_PKS if r == rid}
        for sid, pk in found:
            self.created[(rid, sid)] = pk
            if sid not in known:
                kind, key, stat, env = missing[sid]
                self.new_series.append(catalog_entry(sid, kind, key, stat, env, categorical))

    def add_points(self, sids: list[str], pks: list[int], step: int, t: float,
                   values: list[float | None], shown: list[Any] | None = None) -> None:
        """Points of one step to write; `shown` are the values live pages get when they differ
        from the stored ones (a categorical key's strings for its codes)."""
        n = len(sids)
        self.add_rows(sids, pks, [step] * n, [t] * n, values, shown)

    def add_rows(self, sids: list[str], pks: list[int], steps: list[int], times: list[float],
                 values: list[float | None], shown: list[Any] | None = None) -> None:
        """Points to write, one per (series, step) given."""
        if shown is None and len(pks) > 64:  # many: grouped by numpy
            self.add_block(pointstore.Block.of(pks, steps, times, values),
                           dict(zip(pks, sids, strict=True)))
            return
        self.parts.append(pointstore.Block.of(pks, steps, times, values))
        self.n += len(pks)
        for sid, step, t, s in zip(sids, steps, times, shown or values, strict=True):
            pt = self.points.get(sid)
            if pt is None:
                pt = self.points[sid] = {"step": [], "time": [], "value": []}
            pt["step"].append(step)
            pt["time"].append(t)
            pt["value"].append(s)

    def add_block(self, block: pointstore.Block, sid_of: dict[int, str]) -> None:
        """Points to write given as arrays (an aggregation pass: NaN withdraws a point), with
        the sid of each series pk among them (for the live pages' copy, `Outcome.live_points`,
        built only if a page may listen)."""
        self.parts.append(block)
        self.n += len(block)
        self.blocks.append((block, sid_of))

    def see_step(self, step: int, t: float | None = None) -> None:
        """A step arrived (at trainer time `t` for a step message: the clock of the ETA)."""
        progress.advance(self.run, step, t)
        if self.run.last_step is None or step > self.run.last_step:
            self.run.last_step = step
            self.run_changed = True
        if self.run.first_step is None or step < self.run.first_step:
            self.run.first_step = step
            self.run_changed = True

    def finish(self, msg_id: str, run_created: bool) -> Outcome:
        run = self.run
        run.updated_at = now()
        run.last_seen = _time.time()
        if self.n:
            run.seq = self.seq
            block = pointstore.Block.concat(self.parts)
            pointstore.write(run.pk, run.seq, block)
        with connection.cursor() as cur:
            cur.execute("UPDATE ingest_run SET seq = %s, last_step = %s, first_step = %s,"
                        " updated_at = %s, last_seen = %s, step_seconds = %s,"
                        " last_step_time = %s, uncompacted = uncompacted + %s WHERE id = %s",
                        [run.seq, run.last_step, run.first_step, run.updated_at, run.last_seen,
                         run.step_seconds, run.last_step_time, self.n, run.pk])
        info = run_info(run) if (self.run_changed or run_created) else None
        reply: dict[str, Any] = {"type": "ack", "id": msg_id}
        if self.left_out:
            reply["left_out"] = self.left_out
        return Outcome(reply, run_id=run.pk, seq=run.seq if self.n else None,
                       points=self.points, blocks=self.blocks, new_series=self.new_series,
                       run=info, dirty=self.dirty, timeline=self.timeline)


def lock_run(pk: int) -> Run | None:
    """The run's row, locked for the rest of the transaction (config is never loaded here:
    this runs for every message and aggregation write); None if it no longer exists."""
    lock = connection.features.has_select_for_update
    with connection.cursor() as cur:
        cur.execute(
            "SELECT r.project_id, r.name, r.wire_name, r.started, r.status, r.started_at,"
            " r.updated_at, r.last_step, r.color, r.seq, r.total_steps, r.step_seconds,"
            " r.last_step_time, r.notes, r.first_step, r.last_seen, p.name FROM ingest_run r"
            " JOIN ingest_project p ON p.id = r.project_id WHERE r.id = %s"
            + (" FOR UPDATE OF r" if lock else ""), [pk])
        row = cur.fetchone()
    if row is None:
        return None
    (project_id, name, wire_name, started, status, started_at, updated, last_step, color,
     seq, total_steps, step_seconds, last_step_time, notes, first_step, last_seen, project) = row
    run = Run(id=pk, project_id=project_id, name=name, wire_name=wire_name,
              started=bool(started), status=status, last_step=last_step, color=color, seq=seq,
              total_steps=total_steps, step_seconds=step_seconds, last_step_time=last_step_time,
              notes=notes, first_step=first_step, last_seen=last_seen,
              started_at=_as_datetime(started_at), updated_at=_as_datetime(updated))
    run.project_name = project  # type: ignore[attr-defined]
    return run


def _as_datetime(value: Any) -> datetime:
    """SQLite hands back text, PostgreSQL a datetime."""
    if isinstance(value, datetime):
        return value
    return datetime.fromisoformat(value).replace(tzinfo=UTC)
