"""Apply one validated message to the database, exactly once, in one transaction.

`apply_message` runs synchronously (callers wrap it in `database_sync_to_async`). The run row is
locked first and its `seq` bumped when points are written, which serializes the writers of one
run across server processes and numbers their commits for live clients. Samples are stored raw
and their steps marked dirty; the pipeline (ingest.pipeline.materialize) turns them into
points. Points are written through `ingest.core.commit.PointWriter`, here and there.
"""

from __future__ import annotations

import time as _time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np
from django.db import connection, transaction
from django.db.models import F, Q

from ingest.core import categorical, columns, renormalize, texts
from ingest.core.commit import Outcome, PointWriter, publish_series_pks
from ingest.core.normalize import Observed
from ingest.core.observed import merge_observed, observed_of
from ingest.core.ranges import env_ranges
from ingest.core.series_ids import series_id
from ingest.models import Environment, Run, Series
from ingest.write import events, steps
from ingest.write.runs import Resolved, resolve_run
from trainer_hooks.wire import protocol as p


@dataclass
class Prepared:
    """What a samples message stores that follows from the message alone — each step's stored
    batch (`columns.encode_steps`) and the ranges it spans (`observed_of`) — computed before
    its transaction (`prepare`), so the database's write lock is not held while numpy works."""

    batches: list[tuple[int, int, bytes]]
    seen: Observed


def prepare(msg: p.AnyMessage) -> Prepared | None:
    """A samples message's `Prepared` (None for any other message)."""
    return _prepared(msg) if isinstance(msg, p.Samples) else None


def _prepared(msg: p.Samples) -> Prepared:
    return Prepared(columns.encode_steps(msg), observed_of(msg))


def apply_message(project_id: int, msg: p.AnyMessage,
                  created: dict[tuple[int, str], int] | None = None,
                  prepared: Prepared | None = None) -> Outcome:
    """Store `msg` for the token's project; ack after commit, duplicate ack for a seen id.
    `created` collects the series created in the enclosing transaction (a batch shares one);
    `prepared` is `prepare(msg)` when the caller made it before the transaction."""
    created = {} if created is None else created
    with transaction.atomic():
        found = resolve_run(project_id, msg)
        run = found.run
        if not steps.claim(run.pk, [msg.id]):
            reply = {"type": "ack", "id": msg.id, "duplicate": True}
            return Outcome(_with_run(reply, msg, found), run_id=run.pk)
        writer = PointWriter(run, created)
        if isinstance(msg, p.Samples):
            _apply_samples(writer, msg, prepared or _prepared(msg))
        else:
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




# ---------------------------------------------------------------- handlers


def _apply_step(w: PointWriter, msg: p.Step) -> None:
    """Numbers (bools as 0/1) and strings (categorical keys, see ingest.core.categorical); a value
    of the kind its key does not hold is left out and reported in the ack."""
    t = steps.point_time(msg.time, _time.time())
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
    steps.add_numeric(w, [(msg.step, t, [pk for _, pk, _ in num], [v for _, _, v in num])],
                      {pk: series_id("step", k) for k, pk, _ in num})
    for k, pk, text in txt:
        [code] = categorical.codes(pk, [text])
        w.add_points([series_id("step", k)], [pk], msg.step, t, [float(code)], shown=[text])
    if msg.nonfinite:  # counted; a null does not create its key (it could be a string key)
        bad = [("step", k, None, None) for k in msg.nonfinite if k not in msg.nulls]
        pks = w.series_pks(bad) if bad else []
        nulls = [series_id("step", k) for k in msg.nulls]
        Series.objects.filter(Q(pk__in=pks) | Q(run_id=w.run.pk, sid__in=nulls)).update(
            nonfinite_count=F("nonfinite_count") + 1)
    w.left_out = left_out  # (the step was seen by add_numeric, at its time)


def _apply_samples(w: PointWriter, msg: p.Samples, prepared: Prepared) -> None:
    """Store the raw batch per step (prepared) and mark those steps for re-aggregation (see
    ingest.pipeline.materialize): a step's aggregates are recomputed once for many batches."""
    batches = prepared.batches
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
    change = merge_observed(w.run.pk, prepared.seen, lambda: env_ranges(w.run.pk))
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
        events.touch(run.pk)  # its `inference_lanes` may have changed the timeline series
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
    "ranges": _apply_ranges,
    "run.end": _apply_run_end,
    "events": events.apply_events,
    "gauges": events.apply_gauges,
}
