from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
from channels.testing import WebsocketCommunicator

from ingest.pipeline.materialize import MATERIALIZER
from ingest.write.auth import create_token
from telescope_ui.asgi import application


@pytest.fixture
def token(transactional_db: None) -> str:
    return create_token("proj")[1]


def ingest_communicator(token: str | None) -> WebsocketCommunicator:
    headers = [(b"authorization", f"Bearer {token}".encode())] if token else []
    return WebsocketCommunicator(application, "/ws/ingest/", headers=headers)


class Trainer:
    """A connected ingest socket that sends one message and returns the reply."""

    def __init__(self, comm: WebsocketCommunicator) -> None:
        self.comm = comm

    async def send(self, msg: Any) -> dict[str, Any]:
        await self.comm.send_to(text_data=orjson.dumps(msg).decode())
        return orjson.loads(await self.comm.receive_from(timeout=10))

    async def send_raw(self, *, text: str | None = None, data: bytes | None = None
                       ) -> dict[str, Any]:
        await self.comm.send_to(text_data=text, bytes_data=data)
        return orjson.loads(await self.comm.receive_from(timeout=10))


@pytest.fixture
async def trainer(token: str) -> AsyncIterator[Trainer]:
    comm = ingest_communicator(token)
    connected, _ = await comm.connect()
    assert connected
    yield Trainer(comm)
    await comm.disconnect()
    await settled()


async def settled() -> None:
    """Wait for the materializer to finish (it re-aggregates steps after acks).

    Only a task of this test's event loop is awaited: an earlier test's loop may have closed
    with its materializer task still pending, which cancelled it (awaiting that task raised
    CancelledError in the next test that waited on a run it never kicked)."""
    task = MATERIALIZER.task
    if task is not None and task.get_loop() is asyncio.get_running_loop():
        await task


def step_msg(step: int, metrics: dict[str, Any], *, run: str = "r", mid: str | None = None,
             **extra: Any) -> dict[str, Any]:
    return {"v": 1, "id": mid or f"step-{step}", "type": "step", "run": run, "step": step,
            "metrics": metrics, **extra}


def samples_msg(step: Any, rewards: list[Any], *, run: str = "r", mid: str = "s1",
                groups: list[Any] | None = None, **extra: Any) -> dict[str, Any]:
    n = len(rewards)
    return {"v": 1, "id": mid, "type": "samples", "run": run, "step": step,
            "sample_id": [f"{mid}-{i}" for i in range(n)],
            "group_id": groups if groups is not None else [0] * n,
            "reward": rewards, **extra}


ORIGIN = [(b"origin", b"http://127.0.0.1:8000"), (b"host", b"127.0.0.1:8000")]


class Page:
    def __init__(self, comm: WebsocketCommunicator) -> None:
        self.comm = comm

    async def send(self, **msg: Any) -> None:
        await self.comm.send_to(text_data=orjson.dumps(msg).decode())

    async def recv(self) -> dict[str, Any]:
        return orjson.loads(await self.comm.receive_from(timeout=10))

    async def recv_delta(self) -> dict[str, Any]:
        while True:
            msg = await self.recv()
            if msg["type"] == "delta":
                return msg


@pytest.fixture
async def page(transactional_db: None) -> AsyncIterator[Page]:
    comm = WebsocketCommunicator(application, "/ws/live/", headers=ORIGIN)
    connected, _ = await comm.connect()
    assert connected
    yield Page(comm)
    await comm.disconnect()
