"""Whether a run's trainer is alive (docs/protocol.md "Run status"): `Run.last_seen`.

Every stored message sets it (`ingest.core.commit.PointWriter.finish`); a `heartbeat`
(trainer_hooks sends one every 15 s while connected) sets it without storing anything; and an
ingest connection that has carried a run refreshes it every `refresh_seconds()` while it stays open
(`consumers.IngestConsumer`), so a trainer that is only slow between steps is never shown
crashed. `ingest.core.progress.status_of` turns an old `last_seen` into `crashed`.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from django.conf import settings
from django.db import connection

from ingest.write.runs import find_run
from trainer_hooks.wire import protocol as p

REFRESH_SECONDS = 15.0


def refresh_seconds() -> float:
    """How often an open connection refreshes its runs: well within the crash setting."""
    return min(REFRESH_SECONDS, settings.TELESCOPE_CRASH_SECONDS / 4)


def touch(run_ids: Iterable[int], when: float | None = None) -> None:
    """The trainers of `run_ids` are alive now (or at `when`)."""
    ids = sorted(set(run_ids))
    if not ids:
        return
    marks = ", ".join(["%s"] * len(ids))
    with connection.cursor() as cur:
        cur.execute(f"UPDATE ingest_run SET last_seen = %s WHERE id IN ({marks})",
                    [time.time() if when is None else when, *ids])


def heartbeat(project_id: int, msg: p.Heartbeat) -> int | None:
    """Apply a heartbeat: the run it names (None when there is none yet: a heartbeat never
    creates a run) is alive."""
    run_id = find_run(project_id, msg)
    if run_id is not None:
        touch([run_id])
    return run_id
