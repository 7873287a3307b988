"""Apply one validated message to the database, exactly once, in one transaction.

`apply_message` runs synchronously (callers wrap it in `database_sync_to_async`). The run row is
locked first and its `seq` bumped when points are written, which serializes the writers of one
run across server processes and numbers their commits for live clients. Samples are stored raw
and their steps marked dirty; `ingest.materialize` turns them into points. `PointWriter` is the
one way points are written, here and there: a commit's points as one block (ingest.pointstore).
"""

from __future__ import annotations

import time as _time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np
from django.db import connection, transaction
from django.db.models import F, Q

from ingest import categorical, columns, pointstore, progress, renormalize, texts
from ingest.models import Environment, Run, Series
from ingest.observed import merge_observed
from ingest.payloads import catalog_entry, now, run_info
from ingest.ranges import env_ranges
from ingest.runs import Resolved, resolve_run
from ingest.series_ids import series_id
from trainer_hooks.wire import protocol as p

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


def apply_message(project_id: int, msg: p.AnyMessage,
                  created: dict[tuple[int, str], int] | None = None) -> Outcome:
    """Store `msg` for the token's project; ack after commit, duplicate ack for a seen id.
    `created` collects the series created in the enclosing transaction (a batch shares one)."""
    created = {} if created is None else created
    with transaction.atomic():
        found = resolve_run(project_id, msg)
        run = found.run
        if not _claim_message(run.pk, msg.id):
            reply = {"type": "ack", "id": msg.id, "duplicate": True}
            return Outcome(_with_run(reply, msg, found), run_id=run.pk)
        writer = PointWriter(run, created)
        _HANDLERS[msg.type](writer, msg)
        outcome = writer.finish(msg.id, found.created)
        _with_run(outcome.reply, msg, found)
        publish_series_pks(created)
    return outcome


def _with_run(reply: dict[str, Any], msg: p.AnyMessage, found: Resolved) -> dict[str, Any]:
    """A run.start's ack says which run it opened: `run_id`, `run_name` (the name shown,
    suffixed when earlier data kept the requested one) and `new_run` (true when a run.start
    without resume found earlier data and started a new run)."""
    if msg.type == "run.start":
        reply.update(run_id=found.run.pk, run_name=found.run.name, new_run=found.renamed)
    return reply


def publish_series_pks(created: dict[tuple[int, str], int]) -> None:
    """Remember series created in the current transaction once it commits."""
    transaction.on_commit(lambda: _SERIES_PKS.update(created))


def _claim_message(run_id: int, msg_id: str) -> bool:
    with connection.cursor() as cur:
        cur.execute(
            "INSERT INTO ingest_ingestedmessage (run_id, msg_id, received_at) VALUES (%s, %s, %s)"
            " ON CONFLICT (run_id, msg_id) DO NOTHING",
            [run_id, msg_id, _time.time()],
        )
        return cur.rowcount == 1


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
                       run=info, dirty=self.dirty)


# ---------------------------------------------------------------- handlers


def _apply_step(w: PointWriter, msg: p.Step) -> None:
    """Numbers (bools as 0/1) and strings (categorical keys, see ingest.categorical); a value
    of the kind its key does not hold is left out and reported in the ack."""
    t = msg.time if msg.time is not None else _time.time()
    left_out = {f"metrics.{k}": why for k, why in msg.left_out.items()}
    keys = [("step", k, None, None) for k in msg.metrics]
    pks = w.series_pks(keys)
    tkeys = [("step", k, None, None) for k in msg.text]
    tpks = w.series_pks(tkeys, categorical=True) if tkeys else []
    is_text = categorical.kinds(pks + tpks)
    num = [(k, pk, v) for (_, k, _, _), pk, v in zip(keys, pks, msg.metrics.values(),
                                                     strict=True) if not is_text[pk]]
    txt = [(k, pk, v) for (_, k, _, _), pk, v in zip(tkeys, tpks, msg.text.values(),
                                                     strict=True) if is_text[pk]]
    for k in set(msg.metrics) - {k for k, _, _ in num}:
        left_out[f"metrics.{k}"] = "a number, but this key holds strings (categorical)"
    for k in set(msg.text) - {k for k, _, _ in txt}:
        left_out[f"metrics.{k}"] = "a string, but this key holds numbers"
    w.add_points([series_id("step", k) for k, _, _ in num], [pk for _, pk, _ in num],
                 msg.step, t, [v for _, _, v in num])
    for k, pk, text in txt:
        [code] = categorical.codes(pk, [text])
        w.add_points([series_id("step", k)], [pk], msg.step, t, [float(code)], shown=[text])
    if msg.nonfinite:  # counted; a null does not create its key (it could be a string key)
        bad = [("step", k, None, None) for k in msg.nonfinite if k not in msg.nulls]
        pks = w.series_pks(bad) if bad else []
        nulls = [series_id("step", k) for k in msg.nulls]
        Series.objects.filter(Q(pk__in=pks) | Q(run_id=w.run.pk, sid__in=nulls)).update(
            nonfinite_count=F("nonfinite_count") + 1)
    w.left_out = left_out
    w.see_step(msg.step, t)


def _apply_samples(w: PointWriter, msg: p.Samples) -> None:
    """Store the raw batch per step and mark those steps for re-aggregation (see
    ingest.materialize): a step's aggregates are recomputed once for many batches."""
    batches = columns.encode_steps(msg)
    steps = np.array([step for step, _, _ in batches], dtype=np.int64)
    now = _time.time()
    with connection.cursor() as cur:
        cur.executemany(
            "INSERT INTO ingest_samplebatch (run_id, step, msg_id, n, data)"
            " VALUES (%s, %s, %s, %s, %s)",
            [(w.run.pk, step, msg.id, n, blob) for step, n, blob in batches])
        cur.executemany(
            "INSERT INTO ingest_stepstate (run_id, step, first_seen, n_samples, dirty, version,"
            " done_version, derived_series, derived_values) VALUES (%s, %s, %s, 0, %s, 1, 0,"
            " %s, %s) ON CONFLICT (run_id, step)"
            " DO UPDATE SET dirty = excluded.dirty, norm_only = FALSE,"
            " version = ingest_stepstate.version + 1",
            [(w.run.pk, s, now, True, b"", b"") for s in steps.tolist()],
        )
    w.left_out.update(msg.left_out)  # fields that are no samples column (wire.columns)
    w.left_out.update(texts.store(w.run.pk, msg))  # prompts and completions, apart
    change = merge_observed(w.run.pk, msg, lambda: env_ranges(w.run.pk))
    if change is not None:
        renormalize.schedule(w.run.pk, change)  # a wider observed range renormalizes every step
    # Its packed text was checked on a helper thread meanwhile (wire.texts): wait for it before
    # the commit; a bad one is a ProtocolError that undoes the message (frames._apply).
    p.check_text(msg)
    w.dirty = True
    w.see_step(int(steps[-1]))


def replace_environments(run: Run, envs: list[p.EnvironmentDecl]) -> bool:
    """Replace a run's declarations. When they changed, every step with samples is marked for
    re-aggregation (the normalized family, Gini floors, all-at-min/max and the Ranges family
    depend on them). Returns whether anything changed."""
    old = {e["name"]: e for e in Environment.objects.filter(run=run).values(
        "name", "weight", "reward_min", "reward_max", "metrics_ranges")}
    if old == {e.name: e.as_dict() for e in envs}:
        return False
    Environment.objects.filter(run=run).delete()
    Environment.objects.bulk_create([
        Environment(run=run, name=e.name, weight=e.weight, reward_min=e.reward_min,
                    reward_max=e.reward_max, metrics_ranges=e.metrics_ranges)
        for e in envs
    ])
    renormalize.mark_all_dirty(run.pk)
    return True


def _apply_run_start(w: PointWriter, msg: p.RunStart) -> None:
    run = w.run
    fields: dict[str, Any] = {"status": "running"}
    if msg.config is not None:
        fields["config"] = msg.config
    if msg.time is not None:
        fields["started_at"] = datetime.fromtimestamp(msg.time, UTC)
    if msg.total_steps is not None:
        fields["total_steps"] = msg.total_steps
    Run.objects.filter(pk=run.pk).update(**fields)
    for name, value in fields.items():
        setattr(run, name, value)
    if msg.environments is not None and replace_environments(run, msg.environments):
        w.dirty = True
    w.run_changed = True


def _apply_ranges(w: PointWriter, msg: p.Ranges) -> None:
    if replace_environments(w.run, msg.environments):
        w.dirty = True
    w.run_changed = True


def _apply_run_end(w: PointWriter, msg: p.RunEnd) -> None:
    Run.objects.filter(pk=w.run.pk).update(status=msg.status)
    w.run.status = msg.status
    w.run_changed = True


_HANDLERS: dict[str, Any] = {
    "run.start": _apply_run_start,
    "step": _apply_step,
    "samples": _apply_samples,
    "ranges": _apply_ranges,
    "run.end": _apply_run_end,
}
