"""WebSocket ingest (`/ws/ingest/`): bearer auth, size and rate limits, ack after commit."""

from __future__ import annotations

import time
from typing import Any

import orjson
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings

from ingest import auth, broadcast
from ingest.materialize import MATERIALIZER
from ingest.service import handle_frame

CLOSE_BAD_TOKEN = 4401
CLOSE_TOO_LARGE = 4413
CLOSE_RATE_LIMITED = 4429


class TokenBucket:
    """Messages per second with a burst allowance."""

    def __init__(self, rate: float, burst: float) -> None:
        self.rate, self.capacity, self.tokens = rate, burst, burst
        self.stamp = time.monotonic()

    def take(self) -> bool:
        now = time.monotonic()
        self.tokens = min(self.capacity, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        if self.tokens < 1:
            return False
        self.tokens -= 1
        return True


class IngestConsumer(AsyncWebsocketConsumer):
    """One trainer connection. Frames are handled strictly in order, each in its own
    transaction; the ack (or error) for a frame is sent only after its commit."""

    project_id: int | None = None

    async def connect(self) -> None:
        headers = dict(self.scope.get("headers") or [])
        token = auth.bearer(headers.get(b"authorization"))
        self.project_id = await database_sync_to_async(auth.project_for_token)(token)
        await self.accept()
        if self.project_id is None:
            await self.close(code=CLOSE_BAD_TOKEN)
            return
        MATERIALIZER.kick(None)  # sweep steps a crashed process may have left dirty
        self.bucket = TokenBucket(settings.TELESCOPE_MAX_MESSAGES_PER_SECOND,
                                  settings.TELESCOPE_RATE_BURST)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if self.project_id is None:
            return
        binary = bytes_data is not None
        data: Any = bytes_data if binary else text_data
        size = len(data) if binary else len(data.encode())
        if size > settings.TELESCOPE_MAX_MESSAGE_BYTES:
            await self.close(code=CLOSE_TOO_LARGE)
            return
        if not self.bucket.take():
            await self.close(code=CLOSE_RATE_LIMITED)
            return
        outcome = await database_sync_to_async(handle_frame)(self.project_id, data, binary=binary)
        if outcome.dirty or outcome.seq is not None:
            MATERIALIZER.kick(outcome.run_id)  # before the ack: whoever sees it can wait on it
        await self.send(text_data=orjson.dumps(outcome.reply).decode())
        await broadcast.publish(outcome)
