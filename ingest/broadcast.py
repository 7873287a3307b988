"""After commit: publish new points to the run's channel group `run.<id>`; while a backlog is
re-aggregated, its progress."""

from __future__ import annotations

from channels.layers import get_channel_layer

from ingest.store import Outcome


def group_name(run_id: int) -> str:
    return f"run.{run_id}"


async def publish(outcome: Outcome) -> None:
    """Send what a committed message changed to every live page watching its run."""
    if outcome.run_id is None or (outcome.seq is None and outcome.run is None):
        return
    layer = get_channel_layer()
    if layer is None:
        return
    await layer.group_send(group_name(outcome.run_id), {
        "type": "run.points",
        "run": outcome.run_id,
        "seq": outcome.seq,
        "points": outcome.points,
        "series": outcome.new_series,
        "info": outcome.run,
    })


async def publish_progress(run_id: int, pending: int) -> None:
    """Tell live pages how many of a run's steps still await (re-)aggregation."""
    layer = get_channel_layer()
    if layer is None:
        return
    await layer.group_send(group_name(run_id), {
        "type": "run.progress", "run": run_id, "pending": pending,
    })
