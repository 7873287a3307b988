"""Materialize per-step aggregates from raw samples, off the ack path (and compact series).

Ingest stores a samples batch and marks its step dirty in the same transaction, then acks. The
materializer recomputes each dirty step from all of its committed batches (so the result is
exact whatever the split, order or process) and writes the points with the run's next seq.
Many batches of one step arriving together cost one recomputation. Dirty flags live in the
database, so a crash loses nothing: any process's next sweep picks the steps up.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
from channels.db import database_sync_to_async
from django.conf import settings
from django.db import connection, transaction

from ingest import broadcast
from ingest.aggregate import aggregate_blobs
from ingest.compact import compact_run
from ingest.models import Run, Series, StepState
from ingest.normalize import Observed
from ingest.observed import observed_ranges
from ingest.reads import pending_steps
from ingest.samples import EnvRanges, SeriesKey
from ingest.series_ids import series_id
from ingest.store import Outcome, PointWriter, env_ranges, publish_series_pks
from ingest.worker import die_with_parent

log = logging.getLogger(__name__)

STEPS_PER_PASS = 32
QUIET_SECONDS = 0.03  # a run's batches stopped arriving for this long: aggregate now
MAX_DELAY_SECONDS = 0.25  # ... or it has waited this long under a steady stream
PROGRESS_SECONDS = 0.5  # a backlog reports the steps it has left at most this often
MAX_PASSES = 10_000  # per run and drain: a step rewritten without pause cannot hold it forever
T = TypeVar("T")


@dataclass
class StepResult:
    step: int
    version: int
    time: float
    n: int
    values: dict[SeriesKey, float]


def dirty_runs() -> list[int]:
    with connection.cursor() as cur:
        cur.execute("SELECT DISTINCT run_id FROM ingest_stepstate WHERE dirty")
        return [row[0] for row in cur.fetchall()]


def compute_dirty(run_id: int) -> list[StepResult]:
    """Aggregate up to STEPS_PER_PASS dirty steps from their committed batches. Takes no lock:
    the version read first guarantees the batches read after it include all of that version."""
    with connection.cursor() as cur:
        cur.execute("SELECT step, version, first_seen FROM ingest_stepstate WHERE run_id = %s"
                    " AND dirty ORDER BY step LIMIT %s", [run_id, STEPS_PER_PASS])
        steps = cur.fetchall()
    if not steps:
        return []
    ranges = env_ranges(run_id)
    observed = observed_ranges(run_id)
    results = []
    for step, version, first_seen in steps:
        with connection.cursor() as cur:
            cur.execute("SELECT data FROM ingest_samplebatch WHERE run_id = %s AND step = %s",
                        [run_id, step])
            blobs = [bytes(row[0]) for row in cur.fetchall()]
        n, latest, values = _aggregate(blobs, ranges, observed)
        t = latest if latest is not None else first_seen
        results.append(StepResult(step, version, t, n, values))
    return results


_POOL: ProcessPoolExecutor | None = None


def _aggregate(blobs: list[bytes], ranges: dict[str, EnvRanges], observed: Observed
               ) -> tuple[int, float | None, dict[SeriesKey, float]]:
    """In a worker process when TELESCOPE_AGGREGATE_WORKERS > 0 (the server's default), so a
    big step's numpy work never holds the GIL that the ingest thread needs for its acks."""
    global _POOL
    workers = getattr(settings, "TELESCOPE_AGGREGATE_WORKERS", 0)
    if workers <= 0:
        return aggregate_blobs(blobs, ranges, observed)
    if _POOL is None:
        _POOL = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                                    initializer=die_with_parent)
    try:
        return _POOL.submit(aggregate_blobs, blobs, ranges, observed).result()
    except BrokenProcessPool:
        _POOL = None  # the worker died (e.g. killed): start a new one next time
        raise


def write_results(run_id: int, results: list[StepResult]) -> Outcome | None:
    """Write the points of the results whose step version is still current, under the run's
    row lock (as ingest takes it), and clear those steps' dirty flags."""
    created: dict[tuple[int, str], int] = {}
    with transaction.atomic():
        run = Run.objects.select_for_update().filter(pk=run_id).first()
        if run is None:
            return None
        current = dict(StepState.objects.filter(run_id=run_id, step__in=[r.step for r in results])
                       .values_list("step", "version"))
        writer = PointWriter(run, created)
        for r in results:
            if current.get(r.step) == r.version:  # else a batch came in since: recompute later
                _write_step(writer, r)
        outcome = writer.finish("", run_created=False)
        publish_series_pks(created)
    return outcome


def materialize(run_id: int) -> Outcome | None:
    """One pass over a run's dirty steps; None when nothing was dirty."""
    results = compute_dirty(run_id)
    return write_results(run_id, results) if results else None


def materialize_pass(run_id: int) -> tuple[Outcome | None, int]:
    """One pass, and the steps still dirty after it (0 when nothing was dirty)."""
    outcome = materialize(run_id)
    return outcome, 0 if outcome is None else pending_steps(run_id)


def behind(run_id: int) -> dict[int, int]:
    """{step: version} of the run's steps whose latest samples are not aggregated yet."""
    with connection.cursor() as cur:
        cur.execute("SELECT step, version FROM ingest_stepstate WHERE run_id = %s"
                    " AND done_version < version", [run_id])
        return dict(cur.fetchall())


def still_behind(run_id: int, snapshot: dict[int, int]) -> int:
    """How many steps of a `behind` snapshot have not been aggregated at (at least) the
    version they had then: a barrier waits for 0."""
    if not snapshot:
        return 0
    with connection.cursor() as cur:
        cur.execute("SELECT step, done_version FROM ingest_stepstate WHERE run_id = %s"
                    " AND done_version < version", [run_id])
        lagging = dict(cur.fetchall())
    return sum(1 for step, done in lagging.items()
               if step in snapshot and done < snapshot[step])


def compact(run_id: int) -> None:
    while compact_run(run_id):
        pass


def materialize_all(run_id: int | None = None, max_passes: int = MAX_PASSES,
                    progress: Callable[[int, int], None] | None = None) -> list[Outcome]:
    """Materialize until nothing is dirty (for one run, or all runs), then compact the
    snapshots of series that need it. `progress(run_id, steps_left)` is called after every
    pass."""
    outcomes = []
    for rid in [run_id] if run_id is not None else dirty_runs():
        for _ in range(max_passes):
            outcome, left = materialize_pass(rid)
            if outcome is None:
                break
            outcomes.append(outcome)
            if progress is not None:
                progress(rid, left)
            if not left:
                break
        compact(rid)
    return outcomes


def _write_step(w: PointWriter, r: StepResult) -> None:
    keys = list(r.values)
    pks = w.series_pks(keys)
    w.add_points([series_id(*k) for k in keys], pks, r.step, r.time, list(r.values.values()))
    with connection.cursor() as cur:
        cur.execute("SELECT derived_series FROM ingest_stepstate WHERE run_id = %s"
                    " AND step = %s", [w.run.pk, r.step])
        previous = np.frombuffer(bytes(cur.fetchone()[0]), dtype="<i8")
        cur.execute(
            "UPDATE ingest_stepstate SET n_samples = %s, derived_series = %s, dirty = %s,"
            " done_version = %s WHERE run_id = %s AND step = %s",
            [r.n, np.asarray(pks, dtype="<i8").tobytes(), False, r.version, w.run.pk, r.step])
    _withdraw_vanished(w, r.step, r.time, previous, pks)


def _withdraw_vanished(w: PointWriter, step: int, t: float, previous: np.ndarray,
                       current: list[int]) -> None:
    """Tombstone points of statistics that no longer have a value at this step (rare: e.g. a
    late sample below the declared minimum empties a Gini mean)."""
    gone = np.setdiff1d(previous, np.asarray(current, dtype=np.int64))
    if not gone.size:
        return
    rows = Series.objects.filter(pk__in=gone.tolist()).values_list("pk", "sid")
    pks, sids = [r[0] for r in rows], [r[1] for r in rows]
    w.add_points(sids, pks, step, t, [None] * len(pks))


class Materializer:
    """Per-process scheduler. `kick(run_id)` after an ack; a run is aggregated once its batches
    pause for QUIET_SECONDS (or after MAX_DELAY_SECONDS of steady arrivals), so the batches of
    a step cost one recomputation. Work runs on its own thread, off the ingest thread. The
    loop exits when idle, so no task outlives its event loop; `kick(None)` sweeps every dirty
    run (also ones a crashed process left)."""

    def __init__(self) -> None:
        self.pending: dict[int | None, tuple[float, float]] = {}
        self.task: asyncio.Task[None] | None = None
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="materialize")

    def kick(self, run_id: int | None) -> None:
        now = time.monotonic()
        first = self.pending.get(run_id, (now, now))[0]
        self.pending[run_id] = (first, now)
        if self.task is None or self.task.done():
            self.task = asyncio.ensure_future(self._loop())

    async def _loop(self) -> None:
        while self.pending:
            await asyncio.sleep(QUIET_SECONDS)
            now = time.monotonic()
            ready = [r for r, (first, last) in self.pending.items()
                     if now - last >= QUIET_SECONDS or now - first >= MAX_DELAY_SECONDS]
            for run_id in ready:
                del self.pending[run_id]
                try:
                    for rid in [run_id] if run_id is not None else await self._call(dirty_runs):
                        await self._drain(rid)
                except Exception:  # keep serving; the dirty flags stay for the next sweep
                    log.exception("materializing run %s failed", run_id)

    async def _drain(self, run_id: int) -> None:
        """Pass after pass until the run has no dirty step, publishing each pass's points as
        it commits. A backlog of more than a pass (say, after a range change; not the step a
        live stream is writing) also publishes its progress, at most every PROGRESS_SECONDS,
        then 0 when done."""
        reported_at = None
        for _ in range(MAX_PASSES):
            outcome, left = await self._call(materialize_pass, run_id)
            if outcome is None:
                break
            await broadcast.publish(outcome)
            now = time.monotonic()
            backlog = left > STEPS_PER_PASS or (reported_at is not None and left)
            if backlog and (reported_at is None or now - reported_at >= PROGRESS_SECONDS):
                await broadcast.publish_progress(run_id, left)
                reported_at = now
            if not left:
                break
        if reported_at is not None:
            await broadcast.publish_progress(run_id, 0)
        await self._call(compact, run_id)

    async def _call(self, fn: Callable[..., T], *args: Any) -> T:
        """Run `fn` on the materializer's own thread (its own database connection)."""
        return await database_sync_to_async(fn, thread_sensitive=False,
                                            executor=self.executor)(*args)


MATERIALIZER = Materializer()


async def sweep_forever(interval: float) -> None:
    """The server's own pipeline loop (started with the server, see telescope_ui.serve): every
    `interval` seconds, any run with steps waiting — after a declaration change made by
    another process (`manage.py declare_ranges`), a widened observed range, or a crash — is
    aggregated, with no page or trainer connected."""
    while True:
        try:
            for run_id in await MATERIALIZER._call(dirty_runs):
                if run_id not in MATERIALIZER.pending:
                    MATERIALIZER.kick(run_id)
        except Exception:  # keep sweeping: the database may be back next time
            log.exception("the background sweep failed")
        await asyncio.sleep(interval)
