"""When an observed range widens, earlier steps are re-normalized — at most once per
DELAY_SECONDS per run (MINOR_DELAY_SECONDS for a range that merely creeps).

A reward or sample metric without declared bounds is normalized by its observed range
(ingest.core.normalize), which widens as new extremes arrive: with continuous values almost every
batch early in a run. Re-aggregating every step on each widening would make ingest quadratic, so
a widening only schedules the run (`Run.renormalize_at`: DELAY_SECONDS after a range grew by
more than 1% of its width since the steps were last normalized by it — creeps add up, see
ingest.core.observed — MINOR_DELAY_SECONDS after it merely crept; later widenings join the earliest
schedule). The server's pipeline marks the scheduled runs' steps dirty when due (`apply_due`,
from its sweep), and a `barrier` applies its run's schedule at once when it is a significant
widening's (`apply_now(run, within=DELAY_SECONDS)`: a schedule due that soon), so what a
barrier makes readable is normalized by the latest range up to a creep of under 1% of its
width. Steps aggregated meanwhile use the newest range already; only older steps lag, by at
most the delay plus a sweep. (A barrier that re-aggregated every earlier step for a creep cost
a whole pass over the run: 2,000 steps of 512 samples took 1.2 s after their last ack.)
"""

from __future__ import annotations

import time

from django.db import connection, transaction

DELAY_SECONDS = 5.0  # after a range grew by more than ingest.core.observed.SIGNIFICANT ...
MINOR_DELAY_SECONDS = 60.0  # ... after it only crept (continuous values' new extremes)


def mark_all_dirty(run_id: int) -> None:
    """Every step of the run is to be re-aggregated in full (by the server's pipeline): after
    a declaration change (the declared bounds enter Gini, the ranges and groups families)."""
    with connection.cursor() as cur:
        cur.execute("UPDATE ingest_stepstate SET dirty = %s, norm_only = %s,"
                    " version = version + 1 WHERE run_id = %s", [True, False, run_id])
    _rebase(run_id)


def mark_all_renormalize(run_id: int) -> None:
    """Every step of the run is to have its normalized family recomputed (an observed range
    widened: only that family depends on it); a step already dirty stays as dirty as it was."""
    with connection.cursor() as cur:
        cur.execute("UPDATE ingest_stepstate SET norm_only = CASE WHEN dirty THEN norm_only"
                    " ELSE %s END, dirty = %s, version = version + 1 WHERE run_id = %s",
                    [True, True, run_id])
    _rebase(run_id)


def _rebase(run_id: int) -> None:
    """Every step is to be normalized by the run's observed ranges as they are now: later
    widenings are measured from them (ingest.core.observed)."""
    with connection.cursor() as cur:
        cur.execute("UPDATE ingest_observedrange SET base_lo = lo, base_hi = hi"
                    " WHERE run_id = %s", [run_id])


def schedule(run_id: int, change: str) -> None:
    """An observed range of the run widened (in the ingest transaction): "major" or "minor"
    (see ingest.core.observed.merge_observed). The earliest schedule wins."""
    at = time.time() + (DELAY_SECONDS if change == "major" else MINOR_DELAY_SECONDS)
    with connection.cursor() as cur:
        cur.execute("UPDATE ingest_run SET renormalize_at = CASE WHEN renormalize_at IS NULL"
                    " OR renormalize_at > %s THEN %s ELSE renormalize_at END WHERE id = %s",
                    [at, at, run_id])


def _apply(where: str, params: list[float | int]) -> list[int]:
    with transaction.atomic(), connection.cursor() as cur:
        cur.execute("SELECT id FROM ingest_run WHERE renormalize_at IS NOT NULL AND " + where,
                    params)
        runs = [row[0] for row in cur.fetchall()]
        for run_id in runs:
            cur.execute("UPDATE ingest_run SET renormalize_at = NULL WHERE id = %s", [run_id])
            mark_all_renormalize(run_id)
    return runs


def apply_due() -> list[int]:
    """Mark every step dirty of the runs whose re-normalization is due; their ids."""
    return _apply("renormalize_at <= %s", [time.time()])


def apply_now(run_id: int, within: float | None = None) -> bool:
    """Apply the run's scheduled re-normalization now; with `within`, only a schedule due in
    that many seconds (a barrier: a significant widening, not a creep). Whether it applied."""
    if within is None:
        return bool(_apply("id = %s", [run_id]))
    return bool(_apply("id = %s AND renormalize_at <= %s", [run_id, time.time() + within]))
