"""WebSocket ingest (`/ws/ingest/`): bearer auth, size and rate limits, ack after commit."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import orjson
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings

from ingest.core import broadcast
from ingest.pipeline.kick import kick, wait_aggregated
from ingest.write import auth, health, liveness
from ingest.write.admission import (
    INBOX_FRAMES,
    TokenBucket,
    TokenState,
    ingest_executor,
    token_state,
)
from ingest.write.frames import handle_frames

log = logging.getLogger(__name__)

CLOSE_BAD_TOKEN = 4401
CLOSE_TOO_LARGE = 4413
CLOSE_RATE_LIMITED = 4429
# The storage failed (database down, disk full): nothing of the frames was stored; the client
# reconnects and sends them again. (1011 would say so too, but the WebSocket layer under daphne
# refuses to send it and leaves the socket open and silent.)
CLOSE_STORAGE_FAILED = 4500
# Small frames waiting on a connection are applied together, in one transaction (group
# commit), so that a group's fixed costs (the hop to the writer's thread, the commit, the
# worker's kick) are paid once for them all. One ingest thread serves every connection, so a
# group is bounded by the time it should take (GROUP_SECONDS at the pace this process's recent
# groups were applied at: `Pace`) as well as by GROUP_FRAMES and GROUP_BYTES, and another
# connection's frame never waits long behind it.
GROUP_SECONDS = 0.02
GROUP_FRAMES = 64
GROUP_BYTES = 4 * 1024 * 1024
PACE_BYTES = 256 * 1024


class Pace:
    """Seconds per byte the writer's thread took over its recent big groups (an exponentially
    weighted mean, process-wide: every connection shares the thread), and from it how many
    bytes a group may hold. Only groups of PACE_BYTES or more are counted: a small group's time
    is mostly its fixed costs. It starts at PACE_BYTES per GROUP_SECONDS."""

    per_byte = GROUP_SECONDS / PACE_BYTES

    @classmethod
    def group_bytes(cls) -> int:
        return min(GROUP_BYTES, int(GROUP_SECONDS / cls.per_byte))

    @classmethod
    def applied(cls, size: int, seconds: float) -> None:
        if size >= PACE_BYTES:
            cls.per_byte += 0.25 * (seconds / size - cls.per_byte)


def timed_handle_frames(project_id: int, frames: list[tuple[Any, bool]]) -> tuple[Any, float]:
    """`handle_frames` and the seconds it took on the writer's thread."""
    started = time.perf_counter()
    results = handle_frames(project_id, frames)
    return results, time.perf_counter() - started


class IngestConsumer(AsyncWebsocketConsumer):
    """One trainer connection. Frames are handled strictly in order; the frames waiting when
    the connection's worker is free are applied in one transaction (group commit), and the
    reply to each frame (one object, or for a batch frame a list with one reply per message, in
    order) is sent only after that commit (after aggregation, for a barrier)."""

    project_id: int | None = None
    token: TokenState | None = None
    held_bytes = 0  # of this connection's frames received and not yet applied
    worker: asyncio.Task[None] | None = None
    keeper: asyncio.Task[None] | None = None  # refreshes `runs`' liveness while open
    guard: asyncio.Task[None] | None = None  # closes it (4401) once its token is revoked
    # No channel of its own: ingest needs no channel layer, so a layer that is down (Redis)
    # cannot fail the handshake; publishing is best effort (ingest.core.broadcast).
    channel_layer_alias = "__ingest_needs_no_channel__"

    async def dispatch(self, message: dict[str, Any]) -> None:
        """Channels closes stale database connections before every handler, through a hop to
        its sync thread and back: for each frame received, a tenth of the event loop's time
        under a trainer's stream. A frame's handler only queues it (its database work runs on
        the writer's thread, `database_sync_to_async`, which closes stale connections there),
        so frames skip it; connect and disconnect keep it."""
        if message["type"] == "websocket.receive":
            await self.websocket_receive(message)
        else:
            await super().dispatch(message)

    async def connect(self) -> None:
        headers = dict(self.scope.get("headers") or [])
        token = auth.bearer(headers.get(b"authorization"))
        self.project_id = await database_sync_to_async(auth.project_for_token)(token)
        await self.accept()
        if self.project_id is None or token is None:
            await self.close(code=CLOSE_BAD_TOKEN)
            return
        key = auth.digest(token)
        self.token = token_state(key)
        self.writer = ingest_executor().lane(key)  # its turns, shared with the token's others
        self.guard = asyncio.ensure_future(auth.watch_revocation(
            key, lambda: self.close(code=CLOSE_BAD_TOKEN)))
        self.bucket = TokenBucket(settings.TELESCOPE_MAX_MESSAGES_PER_SECOND,
                                  settings.TELESCOPE_RATE_BURST)
        self.inbox: asyncio.Queue[tuple[Any, bool]] = asyncio.Queue(INBOX_FRAMES)
        self.runs: set[int] = set()  # the runs this connection has carried

    async def disconnect(self, code: int) -> None:
        # Frames not yet committed are not acknowledged: the client resends them (their ids
        # make a resend that did commit a duplicate ack).
        for task in (self.worker, self.keeper, self.guard):
            if task is not None:
                task.cancel()
        # Drop the frames at once, with their count: the consumer ends in reference cycles
        # (its tasks' coroutines refer back to it) that only the garbage collector frees, and
        # a quiet server may not collect for a long time, so frames left in the inbox would
        # stay in memory past the token's bound.
        self.worker = self.keeper = self.guard = None
        inbox = getattr(self, "inbox", None)
        while inbox is not None and not inbox.empty():
            inbox.get_nowait()
        if self.token is not None:
            self.token.release(self.held_bytes)
            self.held_bytes = 0

    async def keep_alive(self) -> None:
        """While the connection is open its runs' trainers are alive (ingest.write.liveness): a
        trainer busy between steps is not shown crashed."""
        while True:
            await asyncio.sleep(liveness.refresh_seconds())
            try:
                await database_sync_to_async(
                    liveness.touch, thread_sensitive=False, executor=self.writer)(
                    set(self.runs))
            except Exception as exc:  # noqa: BLE001 - the next message or refresh tries again
                log.warning("could not refresh the liveness of runs %s: %s", self.runs, exc)

    def carried(self, run_id: int | None) -> None:
        if run_id is not None and run_id not in self.runs:
            self.runs.add(run_id)
            if self.keeper is None:
                self.keeper = asyncio.ensure_future(self.keep_alive())

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if self.project_id is None:
            return
        binary = bytes_data is not None
        data: Any = bytes_data if binary else text_data
        size = len(data) if binary else len(data.encode())
        if size > settings.TELESCOPE_MAX_MESSAGE_BYTES:
            await self.close(code=CLOSE_TOO_LARGE)
            return
        assert self.token is not None
        # A frame (a batch frame too) costs one of the connection's and one of the token's
        # tokens; past the backlog bound the connection is closed, never read on into memory
        # (ingest.write.admission).
        held = len(data)  # (what it holds in memory, near enough for text)
        if not (self.bucket.take() and self.token.bucket.take()) or self.inbox.full() \
                or not self.token.hold(held):
            await self.close(code=CLOSE_RATE_LIMITED)
            return
        self.held_bytes += held
        self.inbox.put_nowait((data, binary))
        if self.worker is None:
            self.worker = asyncio.ensure_future(self._work())

    async def _work(self) -> None:
        """Apply the waiting frames, in order, a group at a time; reply to each after commit."""
        assert self.project_id is not None
        held: tuple[Any, bool] | None = None
        while True:
            frames = [held if held is not None else await self.inbox.get()]
            held, size, limit = None, len(frames[0][0]), Pace.group_bytes()
            while size < limit and len(frames) < GROUP_FRAMES and not self.inbox.empty():
                frame = self.inbox.get_nowait()
                if size + len(frame[0]) > limit:
                    held = frame  # the next group's first
                    break
                frames.append(frame)
                size += len(frame[0])
            try:
                results, seconds = await database_sync_to_async(
                    timed_handle_frames, thread_sensitive=False, executor=self.writer)(
                    self.project_id, frames)
                Pace.applied(size, seconds)
            except Exception as exc:  # the storage failed: nothing acked, the client resends
                log.exception("ingest failed; closing the connection (%d: retry)",
                              CLOSE_STORAGE_FAILED)
                health.ingest_failed(exc)
                await self.close(code=CLOSE_STORAGE_FAILED)
                return
            applied = sum(len(data) for data, _ in frames)
            self.held_bytes -= applied
            assert self.token is not None
            self.token.release(applied)
            health.ingest_succeeded()
            for outcomes, _ in results:
                for outcome in outcomes:
                    self.carried(outcome.run_id)
                    if outcome.run_id is not None and (outcome.dirty or outcome.seq is not None):
                        kick(outcome.run_id)  # before the ack: whoever sees it
            for outcomes, batch in results:  # can wait
                for outcome in outcomes:
                    if outcome.barrier:
                        await wait_aggregated(outcome)
                replies = [o.reply for o in outcomes]
                await self.send(text_data=orjson.dumps(replies if batch else replies[0]).decode())
                for outcome in outcomes:
                    await broadcast.publish(outcome)
