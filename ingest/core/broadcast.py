"""After commit: publish new points to the run's channel group `run.<id>`; while a backlog is
re-aggregated, its progress.

Publishing is best effort: the database is the source of truth, so a channel layer that is
down (Redis gone) never fails an ingest — live pages miss the push and resync from the database
by sequence number. The failure is logged, at most every LOG_EVERY seconds.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import orjson
from channels.layers import InMemoryChannelLayer, get_channel_layer

from ingest.core.commit import Outcome

log = logging.getLogger(__name__)
LOG_EVERY = 30.0
_last_logged = -LOG_EVERY


def group_name(run_id: int) -> str:
    return f"run.{run_id}"


async def publish(outcome: Outcome) -> None:
    """Send what a committed message changed to every live page watching its run (nothing,
    not even the pages' copy of the points, when the in-memory layer knows none watches)."""
    if outcome.run_id is None:
        return
    group = group_name(outcome.run_id)
    if not _may_listen(group):
        return
    if outcome.timeline is not None:  # the Timeline and Performance pages refetch their window
        await _send(group, {"type": "run.events", "run": outcome.run_id,
                            "extent": list(outcome.timeline)})
    if outcome.seq is None and outcome.run is None:
        return
    await _send(group, {
        "type": "run.points",
        "run": outcome.run_id,
        "seq": outcome.seq,
        # The points and new series as JSON, once: a page forwards them as they are, and the
        # in-memory layer, which deep-copies every event for every page of the group, copies
        # bytes for free (a dict of point lists cost a Python-level copy per page, and their
        # queued copies held the memory a soak's server grew by).
        "payload": orjson.dumps({"points": outcome.live_points(), "series": outcome.new_series},
                                option=orjson.OPT_SERIALIZE_NUMPY),
        "info": outcome.run,
    })


def _may_listen(group: str) -> bool:
    """Whether a page may be in the group: the in-memory layer (one process) knows its
    groups; another layer (Redis: pages of other processes) may always have some."""
    layer = get_channel_layer()
    if isinstance(layer, InMemoryChannelLayer):
        return bool(layer.groups.get(group))
    return layer is not None


async def publish_progress(run_id: int, pending: int) -> None:
    """Tell live pages how many of a run's steps still await (re-)aggregation."""
    await _send(group_name(run_id), {"type": "run.progress", "run": run_id, "pending": pending})



async def _send(group: str, event: dict[str, Any]) -> None:
    global _last_logged
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        await layer.group_send(group, event)
    except Exception as exc:  # noqa: BLE001 - any layer failure: live fan-out degrades
        now = time.monotonic()
        if now - _last_logged >= LOG_EVERY:
            _last_logged = now
            log.warning("live updates could not be published (%s: %s); ingest continues, "
                        "pages resync from the database", type(exc).__name__, exc)
