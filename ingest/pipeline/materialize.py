"""Materialize per-step aggregates from raw samples, off the ack path (and compact points).

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
import os
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
from channels.db import database_sync_to_async
from django.conf import settings
from django.db import close_old_connections, connection, transaction

from ingest.core import broadcast, pointstore, renormalize
from ingest.core.commit import Outcome, PointWriter, lock_run, publish_series_pks
from ingest.core.normalize import Observed
from ingest.core.observed import observed_ranges
from ingest.core.ranges import EnvRanges, env_ranges
from ingest.core.series_ids import series_id
from ingest.models import Series
from ingest.pipeline import timeline
from ingest.pipeline.aggregate import Table, aggregate_blobs
from ingest.pipeline.worker import start_worker
from ingest.reads.catalog import pending_steps

log = logging.getLogger(__name__)

STEPS_PER_PASS = 512  # steps aggregated together in one pass (one set of numpy calls) ...
STEPS_PER_WRITE = 64  # ... and written in transactions of this many (ingest interleaves)
SAMPLES_PER_PASS = 250_000  # ... as long as their samples stay under this (one step always)
QUIET_SECONDS = 0.03  # a run's batches stopped arriving for this long: aggregate now
MAX_DELAY_SECONDS = 0.25  # ... or it has waited this long under a steady stream
# A pass costs ~4 ms plus ~0.5 ms per step of 512 samples (passes of a message's 8 steps each
# cost twice what passes of 64 do), so a streaming run gathers: its aggregation starts at most
# every GATHER_SECONDS (a barrier waiting, or MAX_DELAY_SECONDS of waiting, starts it now), and
# a drain whose pass found fewer than GATHER_STEPS dirty steps ends there (the rest gathers).
GATHER_SECONDS = 0.1
GATHER_STEPS = 64
# A streaming run's timeline series are recomputed at most this often (a pass decodes the new
# batches and recomputes the steps they touch); a barrier waiting has them recomputed at once.
TIMELINE_SECONDS = 0.25
PROGRESS_SECONDS = 0.5  # a backlog reports the steps it has left at most this often
CLAIM_SECONDS = 60.0  # a claim not released by then (its process died) lapses
MAX_PASSES = 10_000  # per run and drain: a step rewritten without pause cannot hold it forever
T = TypeVar("T")


@dataclass
class PassResult:
    """The aggregates of one pass's steps: row i of `table` is step `steps[i]`, aggregated from
    its batches as of `versions[i]`, with `n[i]` samples, its points at time `times[i]`.
    `norm_only`: the table holds only the normalized family (the rest is as last written)."""

    steps: list[int]
    versions: list[int]
    times: np.ndarray
    n: np.ndarray
    table: Table
    norm_only: bool = False

    def part(self, a: int, b: int) -> PassResult:
        """Steps a..b-1 of the pass."""
        return PassResult(self.steps[a:b], self.versions[a:b], self.times[a:b], self.n[a:b],
                          Table(self.table.keys, self.table.values[a:b]), self.norm_only)


def dirty_runs() -> list[int]:
    """Runs with steps to aggregate or timeline series to recompute."""
    with connection.cursor() as cur:
        cur.execute("SELECT DISTINCT run_id FROM ingest_stepstate WHERE dirty")
        runs = [row[0] for row in cur.fetchall()]
    return runs + [r for r in timeline.dirty_runs() if r not in set(runs)]


def _in(values: list[int]) -> str:
    return "(" + ", ".join(["%s"] * len(values)) + ")"


def claim(run_id: int, after: int | None = None) -> list[tuple[int, int, float, bool]]:
    """Claim the first dirty steps of a run no other pipeline holds (after step `after` if
    given; up to STEPS_PER_PASS and SAMPLES_PER_PASS, one step at least) for CLAIM_SECONDS:
    (step, version, first_seen, norm_only) of each. On PostgreSQL rows another process is
    claiming are skipped (FOR UPDATE SKIP LOCKED); SQLite serializes writers anyway."""
    now = time.time()
    later = "" if after is None else f" AND step > {int(after)}"
    skip = " FOR UPDATE SKIP LOCKED" if connection.vendor == "postgresql" else ""
    with transaction.atomic(), connection.cursor() as cur:
        cur.execute("SELECT step, version, first_seen, norm_only FROM ingest_stepstate"
                    " WHERE run_id = %s"
                    " AND dirty AND (claimed_until IS NULL OR claimed_until < %s)" + later
                    + " ORDER BY step LIMIT %s" + skip, [run_id, now, STEPS_PER_PASS])
        states = cur.fetchall()
        if not states:
            return []
        steps = [row[0] for row in states]
        cur.execute("SELECT step, SUM(n) FROM ingest_samplebatch WHERE run_id = %s AND step IN "
                    + _in(steps) + " GROUP BY step", [run_id, *steps])
        sizes = dict(cur.fetchall())
        total = np.cumsum([sizes.get(step, 0) for step in steps])
        states = states[:max(1, int(np.searchsorted(total, SAMPLES_PER_PASS, side="right")))]
        steps = [row[0] for row in states]
        cur.execute("UPDATE ingest_stepstate SET claimed_until = %s WHERE run_id = %s AND step IN "
                    + _in(steps), [now + CLAIM_SECONDS, run_id, *steps])
    return states


def release_all(run_id: int) -> None:
    """Give back every claimed step of a run (its claimer died)."""
    with connection.cursor() as cur:
        cur.execute("UPDATE ingest_stepstate SET claimed_until = NULL WHERE run_id = %s"
                    " AND claimed_until IS NOT NULL", [run_id])


def release(run_id: int, steps: list[int]) -> None:
    """Give claimed steps back (written, or given up on)."""
    with connection.cursor() as cur:
        cur.execute("UPDATE ingest_stepstate SET claimed_until = NULL WHERE run_id = %s"
                    " AND step IN " + _in(steps), [run_id, *steps])


def compute_dirty(run_id: int, after: int | None = None) -> PassResult | None:
    """Claim the first dirty steps of a run (see `claim`) and aggregate them from their
    committed batches, together. Takes no lock: the version read first guarantees the batches
    read after it include all of that version."""
    t0 = time.perf_counter()
    states = claim(run_id, after)
    if not states:
        return None
    steps = [row[0] for row in states]
    try:
        return _compute(run_id, states, t0)
    except BaseException:
        release(run_id, steps)  # for another pass (or process) to try again at once
        raise


def _compute(run_id: int, states: list[tuple[int, int, float, bool]], t0: float
             ) -> PassResult:
    steps = [row[0] for row in states]
    # Only an observed range widened for every step of the pass: their samples are unchanged,
    # so only the normalized family is recomputed (about half the work) and rewritten.
    norm_only = all(row[3] for row in states)
    with connection.cursor() as cur:
        cur.execute("SELECT step, data FROM ingest_samplebatch WHERE run_id = %s AND step IN "
                    + _in(steps) + " ORDER BY step, id", [run_id, *steps])
        blobs: dict[int, list[bytes]] = {step: [] for step in steps}
        for step, data in cur.fetchall():
            blobs[step].append(bytes(data))
    with_data = [i for i, step in enumerate(steps) if blobs[step]]
    n_with, latest, found = _aggregate([blobs[steps[i]] for i in with_data],
                                       env_ranges(run_id), observed_ranges(run_id), norm_only)
    n = np.zeros(len(steps), dtype=np.int64)
    n[with_data] = n_with
    values = np.full((len(steps), len(found.keys)), np.nan)
    values[with_data] = found.values
    times = np.array([row[2] for row in states], dtype=np.float64)
    times[with_data] = np.where(np.isnan(latest), times[with_data], latest)
    log.debug("run %s: %d steps aggregated in %.3f s", run_id, len(steps),
              time.perf_counter() - t0)
    return PassResult(steps, [row[1] for row in states], times, n, Table(found.keys, values),
                      norm_only)


def _aggregate(blobs: list[list[bytes]], ranges: dict[str, EnvRanges], observed: Observed,
               norm_only: bool = False) -> tuple[np.ndarray, np.ndarray, Table]:
    if not blobs:
        return np.zeros(0, dtype=np.int64), np.zeros(0), Table([], np.zeros((0, 0)))
    return aggregate_blobs(blobs, ranges, observed, norm_only)


_POOL: ProcessPoolExecutor | None = None


def worker_pool() -> ProcessPoolExecutor | None:
    """The pipeline's worker process(es) when TELESCOPE_AGGREGATE_WORKERS > 0 (the server's
    default), started on first use: a pass's claim, reads, numpy work and point writes run
    there, with its own database connection, so they never hold the GIL that the ingest
    thread needs for its acks (measured per thread, for bench/peers_workload.py's 2,000 steps:
    about 0.5 s of CPU left the server process, whose threads kept ~1.3 s). None: on the
    server's own threads."""
    global _POOL
    workers = getattr(settings, "TELESCOPE_AGGREGATE_WORKERS", 0)
    if workers <= 0:
        return None
    if _POOL is None:  # (the database it works on: this process's, a test database too)
        _POOL = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                                    initializer=start_worker,
                                    initargs=(connection.settings_dict["NAME"],
                                              getattr(connection, "shared_write_lock", None)))
    return _POOL


def in_worker(fn: Callable[..., T], *args: Any) -> T:
    """(In the worker process) `fn(*args)` with a usable database connection, as
    database_sync_to_async gives the server's threads."""
    close_old_connections()
    try:
        return fn(*args)
    finally:
        close_old_connections()


def write_results(run_id: int, result: PassResult) -> Outcome | None:
    """Write a pass's points, STEPS_PER_WRITE steps per transaction (so a big pass never holds
    the database's write lock long: ingest commits in between), as one outcome to broadcast."""
    outcomes = []
    for a in range(0, len(result.steps), STEPS_PER_WRITE):
        outcome = _write_part(run_id, result.part(a, a + STEPS_PER_WRITE))
        if outcome is None:
            return None  # the run was deleted
        outcomes.append(outcome)
    return _merged(outcomes)


def _merged(outcomes: list[Outcome]) -> Outcome | None:
    """Outcomes of consecutive commits as one: every point, at the last seq."""
    if len(outcomes) <= 1:
        return outcomes[0] if outcomes else None
    out = outcomes[-1]
    points: dict[str, dict[str, list[Any]]] = {}
    for o in outcomes:
        for sid, pt in o.points.items():
            mine = points.setdefault(sid, {"step": [], "time": [], "value": []})
            for k in ("step", "time", "value"):
                mine[k] += pt[k]
    seqs = [o.seq for o in outcomes if o.seq is not None]
    return Outcome(out.reply, run_id=out.run_id, seq=seqs[-1] if seqs else None, points=points,
                   blocks=[b for o in outcomes for b in o.blocks],
                   new_series=[e for o in outcomes for e in o.new_series],
                   run=next((o.run for o in reversed(outcomes) if o.run), None), dirty=out.dirty)


def _write_part(run_id: int, result: PassResult) -> Outcome | None:
    """Write the points of the steps whose version is still current (else a batch came in
    since: they stay dirty and are recomputed), under the run's row lock (as ingest takes it),
    and clear those steps' dirty flags. Only points that differ from what the step's previous
    aggregation wrote are written; statistics it no longer has are withdrawn."""
    created: dict[tuple[int, str], int] = {}
    with transaction.atomic():
        run = lock_run(run_id)  # (not the ORM: it would load the config, every time)
        if run is None:
            return None
        with connection.cursor() as cur:
            cur.execute("SELECT step, version, derived_series, derived_values, derived_time"
                        " FROM ingest_stepstate WHERE run_id = %s AND step IN "
                        + _in(result.steps), [run_id, *result.steps])
            previous = {row[0]: row[1:] for row in cur.fetchall()}
        release(run_id, result.steps)
        rows = [i for i, (step, version) in enumerate(zip(result.steps, result.versions,
                                                          strict=True))
                if previous.get(step, (None,))[0] == version]
        writer = PointWriter(run, created)
        if rows:
            _write_changes(writer, result, rows, [previous[result.steps[i]][1:] for i in rows])
        outcome = writer.finish("", run_created=False)
        publish_series_pks(created)
    return outcome


def _write_changes(w: PointWriter, r: PassResult, rows: list[int],
                   previous: list[tuple[Any, Any, float | None]]) -> None:
    """Diff each step's new aggregates against its previous ones (vectorized over the pass's
    steps) and write the difference: new or changed values, every point of a step whose time
    moved, tombstones for vanished statistics. Then record the new state of each step. A
    `norm_only` pass computed only the normalized family: the step's other statistics stand
    as they are (only a normalized one can be withdrawn), and its state keeps them beside the
    new values."""
    keys = r.table.keys
    pks = np.asarray(w.series_pks(keys), dtype=np.int64)
    values = r.table.values[rows]
    times = r.times[rows]
    i, j = np.nonzero(~np.isnan(values))  # row-major: grouped by step
    new_pk, new_v = pks[j], values[i, j]
    old_pk = [_state_pks(bytes(p[0]), len(p[1])) for p in previous]
    old_v = [np.frombuffer(bytes(p[1]), dtype="<f8") if len(p[1]) == 8 * pk.size
             else np.full(pk.size, np.nan) for p, pk in zip(previous, old_pk, strict=True)]
    old_t = np.array([np.nan if p[2] is None else p[2] for p in previous])
    old_i = np.repeat(np.arange(len(rows)), [pk.size for pk in old_pk])
    old_pk_all = np.concatenate([np.zeros(0, dtype=np.int64), *old_pk])
    old_v_all = np.concatenate([np.zeros(0), *old_v])
    span = int(max(pks.max(initial=0), old_pk_all.max(initial=0))) + 1
    new_key, old_key = i * span + new_pk, old_i * span + old_pk_all
    order = np.argsort(old_key)
    pos = np.searchsorted(old_key[order], new_key)
    found = pos < old_key.size
    found[found] = old_key[order][pos[found]] == new_key[found]
    before = np.full(new_key.size, np.nan)
    before[found] = old_v_all[order][pos[found]]
    same = (before == new_v) & (old_t[i] == times[i])
    change = np.flatnonzero(~same)
    steps = np.asarray(r.steps, dtype=np.int64)[rows]
    sid_of = {pk: series_id(*k) for pk, k in zip(pks.tolist(), keys, strict=True)}
    w.add_block(pointstore.Block(new_pk[change], steps[i[change]], times[i[change]],
                                 new_v[change]), sid_of)
    gone_mask = ~np.isin(old_key, new_key)
    if r.norm_only:  # only the computed statistics can have vanished
        gone_mask &= np.isin(old_pk_all, pks)
    gone = np.flatnonzero(gone_mask)
    if gone.size:  # rare: e.g. a declaration removed, a late sample empties a Gini mean
        gone_pk = old_pk_all[gone]
        gone_sid = dict(Series.objects.filter(pk__in=np.unique(gone_pk).tolist())
                        .values_list("pk", "sid"))
        w.add_block(pointstore.Block(gone_pk, steps[old_i[gone]], times[old_i[gone]],
                                     np.full(gone.size, np.nan)), gone_sid)
    bounds = np.searchsorted(i, np.arange(len(rows) + 1)).tolist()
    state = [(new_pk[a:b], new_v[a:b]) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    if r.norm_only:  # the statistics this pass did not compute stay in the step's state
        kept = ~np.isin(old_pk_all, pks)
        state = [(np.concatenate([old_pk_all[kept & (old_i == k)], pk]),
                  np.concatenate([old_v_all[kept & (old_i == k)], v]))
                 for k, (pk, v) in enumerate(state)]
    with connection.cursor() as cur:
        cur.executemany(
            "UPDATE ingest_stepstate SET n_samples = %s, derived_series = %s,"
            " derived_values = %s, derived_time = %s, dirty = %s, norm_only = %s,"
            " done_version = %s WHERE run_id = %s AND step = %s",
            [(int(r.n[row]), _state_pk_bytes(pk), v.astype("<f8").tobytes(),
              float(times[k]), False, False, r.versions[row], w.run.pk, r.steps[row])
             for k, (row, (pk, v)) in enumerate(zip(rows, state, strict=True))])


def _state_pk_bytes(pks: np.ndarray) -> bytes:
    """A step's aggregated series (its state's `derived_series`): int32 when every pk fits,
    half the bytes of int64 (which older states, and pks beyond int32, have)."""
    return pointstore.narrow(pks).tobytes()


def _state_pks(data: bytes, values_bytes: int) -> np.ndarray:
    """`_state_pk_bytes` read back: int32 when its values (8 bytes each) take twice its
    bytes, else int64 (as many bytes as the values, or values missing)."""
    if data and 2 * len(data) == values_bytes:
        return np.frombuffer(data, dtype="<i4").astype(np.int64)
    return np.frombuffer(data, dtype="<i8")


def materialize(run_id: int) -> Outcome | None:
    """One pass over a run's dirty steps; None when nothing was dirty."""
    result = compute_dirty(run_id)
    return None if result is None else write_counted(run_id, result)[0]


def write_counted(run_id: int, result: PassResult) -> tuple[Outcome | None, int]:
    """`write_results`, and the steps still dirty after it."""
    t0 = time.perf_counter()
    outcome = write_results(run_id, result)
    written = outcome.point_count() if outcome else 0
    log.debug("run %s: %d points of %d steps written in %.3f s", run_id, written,
              len(result.steps), time.perf_counter() - t0)
    return outcome, pending_steps(run_id)


def materialize_pass(run_id: int) -> tuple[Outcome | None, int]:
    """One pass, and the steps still dirty after it (0 when nothing was dirty)."""
    result = compute_dirty(run_id)
    return (None, 0) if result is None else write_counted(run_id, result)


@dataclass
class Written:
    """A pass the worker computed and wrote in one call (`pass_written`): its last step, how
    many steps and samples it had, its outcome to publish and the steps still dirty after it."""

    last_step: int
    steps: int
    samples: int
    outcome: Outcome | None
    left: int


def pass_written(run_id: int, after: int | None) -> Written | None:
    """(In the worker) the first dirty steps after `after`, aggregated and written; None when
    there were none."""
    result = compute_dirty(run_id, after)
    if result is None:
        return None
    outcome, left = write_counted(run_id, result)
    return Written(result.steps[-1], len(result.steps), int(result.n.sum()), outcome, left)


class _Progress:
    """A drain's progress for live pages: the steps left after each pass while a backlog of
    more than a pass waits (at most every PROGRESS_SECONDS), then 0 when it is done."""

    def __init__(self, run_id: int) -> None:
        self.run_id = run_id
        self.reported_at: float | None = None

    async def left(self, left: int) -> None:
        now = time.monotonic()
        backlog = left > STEPS_PER_PASS or (self.reported_at is not None and left)
        if backlog and (self.reported_at is None or now - self.reported_at >= PROGRESS_SECONDS):
            await broadcast.publish_progress(self.run_id, left)
            self.reported_at = now

    async def done(self) -> None:
        if self.reported_at is not None:
            await broadcast.publish_progress(self.run_id, 0)


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
    """Fold the run's point blocks into chunks while enough of them wait
    (ingest.core.pointstore)."""
    while pointstore.compact(run_id):
        pass


def materialize_all(run_id: int | None = None, max_passes: int = MAX_PASSES,
                    progress: Callable[[int, int], None] | None = None) -> list[Outcome]:
    """Materialize until nothing is dirty (for one run, or all runs), then compact the run's
    points if due. `progress(run_id, steps_left)` is called after every
    pass."""
    outcomes = []
    if run_id is not None:
        renormalize.apply_now(run_id)  # a widened range's re-normalization: now, not later
    else:
        renormalize.apply_due()
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
        found = timeline.timeline_pass(rid)
        if found is not None:
            outcomes.append(found)
        compact(rid)
    return outcomes


class Materializer:
    """Per-process scheduler. `kick(run_id)` after an ack; a run is aggregated once its batches
    pause for QUIET_SECONDS (or after MAX_DELAY_SECONDS of steady arrivals), so the batches of
    a step cost one recomputation. Work runs on its own thread, off the ingest thread. The
    loop exits when idle, so no task outlives its event loop; `kick(None)` sweeps every dirty
    run (also ones a crashed process left)."""

    def __init__(self) -> None:
        # run -> (first kick, last kick, urgent) since its last pass started
        self.pending: dict[int | None, tuple[float, float, bool]] = {}
        self.last_pass: dict[int | None, float] = {}
        self.timeline_at: dict[int, float] = {}  # when each run's last timeline pass began
        self.timeline_later: set[int] = set()  # runs whose timeline pass is scheduled
        self.task: asyncio.Task[None] | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="materialize")
        # The next pass is aggregated on this thread while the current one is written.
        self.ahead = ThreadPoolExecutor(max_workers=1, thread_name_prefix="aggregate")

    def kick(self, run_id: int | None, *, urgent: bool = False) -> None:
        """On the event loop: aggregate the run's dirty steps (every run's with None) soon;
        `urgent` (a barrier waits): at the next tick, without gathering."""
        now = time.monotonic()
        first, _, was_urgent = self.pending.get(run_id, (now, now, False))
        self.pending[run_id] = (first, now, urgent or was_urgent)
        self.loop = asyncio.get_running_loop()
        if self.task is None or self.task.done() or self.task.get_loop() is not self.loop:
            self.task = asyncio.ensure_future(self._loop())

    def notify(self, run_id: int) -> None:
        """From any thread (the HTTP ingest view): `kick` on the pipeline's loop, if one runs
        in this process; else the steps wait for a sweep."""
        loop = self.loop
        if loop is not None and loop.is_running():
            loop.call_soon_threadsafe(self.kick, run_id)

    async def _loop(self) -> None:
        while self.pending:
            await asyncio.sleep(QUIET_SECONDS)
            now = time.monotonic()
            ready = [r for r, (first, last, urgent) in self.pending.items()
                     if self._due(r, first, last, urgent, now)]
            for run_id in ready:
                urgent = self.pending.pop(run_id)[2]
                self.last_pass[run_id] = now
                try:
                    for rid in [run_id] if run_id is not None else await self._call(dirty_runs):
                        await self._drain(rid, urgent=urgent)
                except Exception:  # keep serving; the dirty flags stay for the next sweep
                    log.exception("materializing run %s failed", run_id)

    def _urgent(self, run_id: int) -> bool:
        return self.pending.get(run_id, (0.0, 0.0, False))[2]

    def _due(self, run_id: int | None, first: float, last: float, urgent: bool,
             now: float) -> bool:
        if urgent or now - first >= MAX_DELAY_SECONDS:
            return True
        return (now - last >= QUIET_SECONDS
                and now - self.last_pass.get(run_id, -GATHER_SECONDS) >= GATHER_SECONDS)

    async def _drain(self, run_id: int, *, urgent: bool = False) -> None:
        """Pass after pass until the run has no dirty step, publishing each pass's points as
        it commits; the next pass is aggregated while this one is written (on the server's
        threads), or, in the worker process, computed and written in one call while this one's
        points are published. A backlog of more
        than a pass (say, after a range change; not the step a live stream is writing) also
        publishes its progress, at most every PROGRESS_SECONDS, then 0 when done."""
        try:
            await self._passes(run_id)
            await self._timeline(run_id, urgent)
        except BrokenProcessPool:
            # The worker died holding claims (a pass it was computing or writing): give the
            # run's claimed steps back now rather than after CLAIM_SECONDS. (Another server
            # process's claims on the run go too: at worst a step is aggregated twice; its
            # version check keeps what is written exact.)
            await self._call(release_all, run_id)
            raise

    async def _passes(self, run_id: int) -> None:
        progress = _Progress(run_id)
        if worker_pool() is not None:
            await self._worker_passes(run_id, progress)
        else:
            await self._thread_passes(run_id, progress)
        await progress.done()
        await self._offload(compact, run_id)

    def _small(self, run_id: int, steps: int, samples: int) -> bool:
        """A small pass of a stream ends the drain: what arrives meanwhile gathers for the next
        one (a barrier waiting makes it urgent: no gathering then)."""
        return (steps < min(GATHER_STEPS, STEPS_PER_PASS) and samples < SAMPLES_PER_PASS // 4
                and not self._urgent(run_id))

    async def _worker_passes(self, run_id: int, progress: _Progress) -> None:
        """Each pass computed and written by the worker in one call (`pass_written`: its
        aggregates never travel to this process and back); the next pass is submitted before
        this one's points are published, so the worker aggregates while they are."""
        after: int | None = None  # the last step of the pass just written
        ahead: asyncio.Future[Written | None] | None = self._written(run_id, None)
        try:
            for _ in range(MAX_PASSES):
                assert ahead is not None  # (None only on the way out)
                done = await ahead
                ahead = None
                if done is None:
                    if after is None:
                        break
                    after = None  # from the start again: steps re-dirtied meanwhile
                    ahead = self._written(run_id, None)
                    continue
                after = done.last_step
                if not self._small(run_id, done.steps, done.samples):
                    ahead = self._written(run_id, after)
                if done.outcome is not None:
                    await broadcast.publish(done.outcome)
                await progress.left(done.left)
                if ahead is None:
                    break
        finally:
            if ahead is not None:  # never leave a pass running unowned (it writes all the same)
                await asyncio.wait([ahead])

    def _written(self, run_id: int, after: int | None) -> asyncio.Future[Written | None]:
        return asyncio.ensure_future(self._offload(pass_written, run_id, after))

    async def _thread_passes(self, run_id: int, progress: _Progress) -> None:
        """On the server's threads: the next pass is aggregated (on the `ahead` thread) while
        this one is written (on the materializer's)."""
        after: int | None = None  # the last step of the pass being written
        ahead: asyncio.Future[PassResult | None] | None = self._compute(run_id, None)
        try:
            for _ in range(MAX_PASSES):
                assert ahead is not None  # (None only on the way out)
                result = await ahead
                if result is None:
                    if after is None:
                        break
                    after = None  # from the start again: steps re-dirtied meanwhile
                    ahead = self._compute(run_id, None)
                    continue
                after = result.steps[-1]
                small = self._small(run_id, len(result.steps), int(result.n.sum()))
                write = asyncio.ensure_future(self._offload(write_counted, run_id, result))
                ahead = None if small else self._compute(run_id, after)
                outcome, left = await write
                if outcome is not None:
                    await broadcast.publish(outcome)
                await progress.left(left)
                if ahead is None:
                    break
        finally:
            if ahead is not None:
                await asyncio.wait([ahead])  # never leave an aggregation running unowned
                unused = None if ahead.cancelled() or ahead.exception() else ahead.result()
                if unused is not None:  # the loop ended early: give its claimed steps back
                    await self._call(release, run_id, unused.steps)

    async def _timeline(self, run_id: int, urgent: bool) -> None:
        """The run's timeline series brought up to date if its events changed
        (ingest.pipeline.timeline): at most every TIMELINE_SECONDS while events stream in, at
        once for a barrier."""
        if await self._call(timeline.behind, run_id) is None:
            return  # no events since its series were computed (most runs: none at all)
        now = time.monotonic()
        wait = self.timeline_at.get(run_id, -TIMELINE_SECONDS) + TIMELINE_SECONDS - now
        if wait > 0 and not urgent and not self._urgent(run_id):
            if run_id not in self.timeline_later:
                self.timeline_later.add(run_id)
                asyncio.get_running_loop().call_later(wait, self._timeline_due, run_id)
            return
        self.timeline_at[run_id] = now
        outcome = await self._offload(timeline.timeline_pass, run_id)
        if outcome is not None:
            await broadcast.publish(outcome)

    def _timeline_due(self, run_id: int) -> None:
        self.timeline_later.discard(run_id)
        self.kick(run_id)

    def _compute(self, run_id: int, after: int | None) -> asyncio.Future[PassResult | None]:
        return asyncio.ensure_future(database_sync_to_async(
            compute_dirty, thread_sensitive=False, executor=self.ahead)(run_id, after))

    async def _offload(self, fn: Callable[..., T], *args: Any) -> T:
        """Run `fn` in the worker process, or without one on the materializer's thread."""
        global _POOL
        pool = worker_pool()
        if pool is None:
            return await self._call(fn, *args)
        try:
            return await asyncio.wrap_future(pool.submit(in_worker, fn, *args))
        except BrokenProcessPool:
            if _POOL is pool:  # the worker died (e.g. killed): start a new one next time
                _POOL = None
                if hasattr(connection, "install_write_lock"):  # it may have died holding the
                    connection.install_write_lock()  # write lock: the new worker gets a new one
            raise

    async def _call(self, fn: Callable[..., T], *args: Any) -> T:
        """Run `fn` on the materializer's own thread (its own database connection)."""
        return await database_sync_to_async(fn, thread_sensitive=False,
                                            executor=self.executor)(*args)


MATERIALIZER = Materializer()


def checkpoint() -> None:
    """Fold SQLite's write-ahead log into the database (PASSIVE: never waits for readers or
    writers) here, on the pipeline's thread, rather than in some ingest commit."""
    if connection.vendor == "sqlite":
        with connection.cursor() as cur:
            cur.execute("PRAGMA wal_checkpoint(PASSIVE)")


async def sweep_forever(interval: float) -> None:
    """The server's own pipeline loop (started with the server, see telescope_ui.serve): every
    `interval` seconds, any run with steps waiting — after a declaration change made by
    another process (`manage.py declare_ranges`), a widened observed range, or a crash — is
    aggregated, with no page or trainer connected; and SQLite's write-ahead log is checkpointed."""
    MATERIALIZER.loop = asyncio.get_running_loop()
    pool = worker_pool()
    if pool is not None:  # start the worker (and its Django) now, not at the first pass
        pool.submit(os.getpid)
    while True:
        try:
            await MATERIALIZER._call(renormalize.apply_due)
            await MATERIALIZER._call(checkpoint)
            for run_id in await MATERIALIZER._call(dirty_runs):
                if run_id not in MATERIALIZER.pending:
                    MATERIALIZER.kick(run_id)
        except Exception:  # keep sweeping: the database may be back next time
            log.exception("the background sweep failed")
        await asyncio.sleep(interval)
