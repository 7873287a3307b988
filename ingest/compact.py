"""Series snapshots: pack a series' points into one blob so cold reads stay fast.

A snapshot holds every point with seq ≤ its seq; a reader adds the points written after it
(index on (series, seq)). Compaction runs on the materializer's thread after writes, for series
with at least COMPACT_AFTER commits since their snapshot. Snapshots are derived data: dropping
them all loses nothing.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from django.db import connection, transaction

Arrays = tuple[np.ndarray, np.ndarray, np.ndarray]  # step (int64), time, value (float64)

COMPACT_AFTER = 128
SERIES_PER_PASS = 400
EMPTY: Arrays = (np.empty(0, np.int64), np.empty(0), np.empty(0))


def pack(arrays: Arrays) -> bytes:
    step, time, value = arrays
    return (step.astype("<i8").tobytes() + time.astype("<f8").tobytes()
            + value.astype("<f8").tobytes())


def unpack(blob: bytes, n: int) -> Arrays:
    raw = np.frombuffer(bytes(blob), dtype=np.uint8)
    step = raw[: 8 * n].view("<i8")
    time = raw[8 * n: 16 * n].view("<f8")
    value = raw[16 * n: 24 * n].view("<f8")
    return step.astype(np.int64), time.astype(np.float64), value.astype(np.float64)


def merge(old: Arrays, new: Arrays) -> Arrays:
    """Upsert `new` points into `old` by step; NaN values in `new` delete the point."""
    steps = np.concatenate([old[0], new[0]])
    order = np.argsort(steps, kind="stable")  # stable: for a repeated step, new comes last
    s = steps[order]
    last = np.r_[s[1:] != s[:-1], True] if s.size else np.empty(0, bool)
    pick = order[last]
    time = np.concatenate([old[1], new[1]])[pick]
    value = np.concatenate([old[2], new[2]])[pick]
    keep = ~np.isnan(value)
    return s[last][keep], time[keep], value[keep]


def group_rows(rows: list[tuple[Any, ...]]) -> dict[int, Arrays]:
    """Rows (series, step, time, value) → per-series step-sorted arrays; null → NaN."""
    if not rows:
        return {}
    table = np.array(rows, dtype=np.float64)  # None (a tombstone) becomes NaN
    table = table[np.lexsort((table[:, 1], table[:, 0]))]
    series = table[:, 0].astype(np.int64)
    cuts = np.flatnonzero(np.diff(series)) + 1
    return {int(chunk[0, 0]): (chunk[:, 1].astype(np.int64), chunk[:, 2].copy(),
                               chunk[:, 3].copy())
            for chunk in np.split(table, cuts)}


def load(pks: list[int]) -> dict[int, Arrays]:
    """Current arrays of the given series: snapshot blob plus the points written after it."""
    marks = ", ".join(["%s"] * len(pks))
    with connection.cursor() as cur:
        cur.execute(f"SELECT series_id, seq, n, data FROM ingest_seriessnapshot"
                    f" WHERE series_id IN ({marks})", pks)
        snaps = {pk: (seq, unpack(data, n)) for pk, seq, n, data in cur.fetchall()}
        rows: list[tuple[Any, ...]] = []
        for pk in pks:  # one indexed range scan per series: (series, seq > snapshot seq)
            cur.execute("SELECT series_id, step, time, value FROM ingest_point"
                        " WHERE series_id = %s AND seq > %s", [pk, snaps.get(pk, (0,))[0]])
            rows.extend(cur.fetchall())
    deltas = group_rows(rows)
    out = {}
    for pk in pks:
        base = snaps[pk][1] if pk in snaps else EMPTY
        out[pk] = merge(base, deltas[pk]) if pk in deltas else base
    return out


def compact_run(run_id: int) -> int:
    """Snapshot the run's series with COMPACT_AFTER points written since their last snapshot;
    returns how many were compacted."""
    with connection.cursor() as cur:
        cur.execute("SELECT id FROM ingest_series WHERE run_id = %s AND pending >= %s LIMIT %s",
                    [run_id, COMPACT_AFTER, SERIES_PER_PASS])
        pks = [row[0] for row in cur.fetchall()]
        if not pks:
            return 0
        cur.execute("SELECT seq FROM ingest_run WHERE id = %s", [run_id])
        seq = cur.fetchone()[0]  # read first: anything later stays a delta
    arrays = load(pks)
    with transaction.atomic(), connection.cursor() as cur:
        cur.executemany(
            "INSERT INTO ingest_seriessnapshot (series_id, seq, n, data) VALUES (%s, %s, %s, %s)"
            " ON CONFLICT (series_id) DO UPDATE SET seq = excluded.seq, n = excluded.n,"
            " data = excluded.data",
            [(pk, seq, int(a[0].size), pack(a)) for pk, a in arrays.items()])
        marks = ", ".join(["%s"] * len(pks))
        cur.execute(f"UPDATE ingest_series SET pending = 0 WHERE id IN ({marks})", pks)
    return len(pks)
