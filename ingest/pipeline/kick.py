"""What the write side may ask of the pipeline, and all it may: `kick` a run whose steps it
marked dirty (from the event loop, before the ack), `notify` it from another thread (the HTTP
view), and `wait_aggregated` for a `barrier`. Everything else of the pipeline (passes,
workers, its broadcasts) stays behind this module (tests/unit/test_ingest_layering.py).
"""

from __future__ import annotations

import asyncio
import time

from channels.db import database_sync_to_async

from ingest.core import renormalize
from ingest.core.commit import Outcome
from ingest.pipeline import timeline
from ingest.pipeline.materialize import MATERIALIZER, behind, still_behind
from trainer_hooks.wire.protocol import ProtocolError

BARRIER_TIMEOUT_SECONDS = 120.0


def kick(run_id: int, *, urgent: bool = False) -> None:
    """On the event loop: aggregate the run's dirty steps soon (`urgent`: at the next tick)."""
    MATERIALIZER.kick(run_id, urgent=urgent)


def notify(run_id: int) -> None:
    """From any thread: `kick` on the pipeline's loop if one runs in this process; else the
    run's steps wait for a sweep."""
    MATERIALIZER.notify(run_id)


async def wait_aggregated(outcome: Outcome) -> None:
    """Hold a barrier's ack until every step of its run that was behind when it arrived has
    been aggregated at least as far (read-your-writes); an error reply after
    BARRIER_TIMEOUT_SECONDS."""
    run_id = outcome.run_id
    if run_id is None:
        return
    # A significantly widened range's scheduled re-normalization is part of what the barrier
    # makes readable (a creep's waits for its schedule: see ingest.core.renormalize).
    await database_sync_to_async(renormalize.apply_now)(run_id, renormalize.DELAY_SECONDS)
    snapshot = await database_sync_to_async(behind)(run_id)
    events = await database_sync_to_async(timeline.behind)(run_id)  # its timeline version
    if snapshot or events is not None:
        kick(run_id, urgent=True)
    started = time.monotonic()
    kicked = started
    while snapshot or events is not None:
        left = await database_sync_to_async(still_behind)(run_id, snapshot)
        if events is not None and await database_sync_to_async(timeline.caught_up)(
                run_id, events):
            events = None
        if not left and events is None:
            return
        left = left or 1  # (the timeline series: one more to go)
        now = time.monotonic()
        if now - started > BARRIER_TIMEOUT_SECONDS:
            outcome.reply = ProtocolError(
                "timeout", None, f"{left} steps of the run are still being aggregated after "
                f"{BARRIER_TIMEOUT_SECONDS:.0f} s").as_reply(outcome.reply.get("id"))
            return
        if now - kicked >= 1.0:  # (not more often: every kick postpones the quiet-time pass)
            kick(run_id)
            kicked = now
        await asyncio.sleep(0.02)
