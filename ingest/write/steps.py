"""The rules every step write follows, one message at a time (ingest.write.store) or a group of
them at once (ingest.write.bulk): which message ids a run has not applied yet (each applies
once), a step point's time, and a step's numeric values as points of one block."""

from __future__ import annotations

import time as _time
from collections.abc import Iterable, Sequence

import numpy as np
from django.db import connection

from ingest.core import pointstore
from ingest.core.commit import PointWriter


def claim(run_id: int, ids: Sequence[str]) -> set[str]:
    """Record the message ids the run has not applied and return them (the caller holds the
    run's row lock, so no other writer claims them meanwhile); a repeated id counts once."""
    distinct = list(dict.fromkeys(ids))
    marks = ", ".join(["%s"] * len(distinct))
    with connection.cursor() as cur:
        cur.execute(f"SELECT msg_id FROM ingest_ingestedmessage WHERE run_id = %s AND msg_id IN"
                    f" ({marks})", [run_id, *distinct])
        applied = {row[0] for row in cur.fetchall()}
        fresh = [i for i in distinct if i not in applied]
        now = _time.time()
        cur.executemany("INSERT INTO ingest_ingestedmessage (run_id, msg_id, received_at)"
                        " VALUES (%s, %s, %s)", [(run_id, i, now) for i in fresh])
    return set(fresh)


def point_time(sent: float | None, now: float) -> float:
    """A step's points are at the trainer's time when the message gives one, else the
    server's."""
    return sent if sent is not None else now


def add_numeric(w: PointWriter, steps: Iterable[tuple[int, float, Sequence[int],
                                                      Sequence[float]]],
                sid_of: dict[int, str]) -> None:
    """Points of numeric step values, one block for all: per step (step, time, series pks,
    values); the step is seen (progress, first and last step) at its time."""
    rows = list(steps)
    sizes = [len(pks) for _, _, pks, _ in rows]
    w.add_block(pointstore.Block.of(
        [pk for _, _, pks, _ in rows for pk in pks],
        np.repeat([step for step, _, _, _ in rows], sizes),
        np.repeat([t for _, t, _, _ in rows], sizes),
        [v for _, _, _, values in rows for v in values]), sid_of)
    for step, t, _, _ in rows:
        w.see_step(step, t)
