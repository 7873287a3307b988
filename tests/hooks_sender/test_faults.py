"""No server-side fault holds a trainer (docs/protocol.md "Replies"): against a fake ingest
server, a session whose frames are never answered (the socket open, pings answered) is dropped
after `ack_timeout` and everything is sent again on a new one; a close with 4500 (the server's
storage failed) is retried the same way. Nothing is lost either way."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from typing import Any

import msgpack
import orjson
import pytest
from websockets.asyncio.server import ServerConnection, serve

from trainer_hooks import connect

Behaviour = Callable[[int], str]  # connection number -> "silent", "close4500" or "ack"


class FakeIngest:
    """A WebSocket server on its own thread that acks (or not) as `behaviour` says per
    connection, recording the ids it acknowledged."""

    def __init__(self, behaviour: Behaviour) -> None:
        self.behaviour = behaviour
        self.connections = 0
        self.acked: set[str] = set()
        self.ready = threading.Event()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self.start(), self.loop).result(10)

    async def start(self) -> None:
        self.server = await serve(self.handle, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]

    async def handle(self, ws: ServerConnection) -> None:
        self.connections += 1
        mode = self.behaviour(self.connections)
        async for frame in ws:
            if mode == "silent":
                continue  # read on, answer nothing: what a wedged server looked like
            if mode == "close4500":
                await ws.close(4500, "storage failed")
                return
            obj = msgpack.unpackb(frame) if isinstance(frame, bytes) else orjson.loads(frame)
            replies = [self.ack(m) for m in (obj if isinstance(obj, list) else [obj])]
            await ws.send(orjson.dumps(replies if isinstance(obj, list) else replies[0]))

    def ack(self, message: dict[str, Any]) -> dict[str, Any]:
        self.acked.add(message["id"])
        return {"type": "ack", "id": message["id"]}

    def stop(self) -> None:
        async def close() -> None:
            self.server.close()
            await self.server.wait_closed()

        asyncio.run_coroutine_threadsafe(close(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@pytest.fixture
def fake() -> Iterator[Callable[[Behaviour], FakeIngest]]:
    servers: list[FakeIngest] = []

    def make(behaviour: Behaviour) -> FakeIngest:
        servers.append(FakeIngest(behaviour))
        return servers[-1]

    yield make
    for server in servers:
        server.stop()


def log_and_flush(server: FakeIngest, **options: Any) -> tuple[bool, dict[str, int]]:
    client = connect(f"ws://127.0.0.1:{server.port}", "token", "faults", spool=False,
                     backoff_initial=0.05, backoff_max=0.2, **options)
    for step in range(50):
        client.log_step(step, {"loss": float(step)})
    ok = client.flush(timeout=30)
    stats = client.stats
    client.close(timeout=5, status="finished")
    return ok, stats


def test_a_server_that_never_answers_is_left_after_the_ack_timeout_and_nothing_is_lost(
        fake: Callable[[Behaviour], FakeIngest]) -> None:
    server = fake(lambda n: "silent" if n == 1 else "ack")
    ok, stats = log_and_flush(server, ack_timeout=1.0)
    assert ok, stats
    assert stats["ack_timeouts"] >= 1 and server.connections >= 2
    assert stats["pending"] == 0
    assert sum(1 for i in server.acked if not i.startswith("hb-")) >= 51  # run.start + 50


def test_without_replies_the_client_waits_no_longer_than_the_ack_timeout_allows(
        fake: Callable[[Behaviour], FakeIngest]) -> None:
    server = fake(lambda n: "silent")
    client = connect(f"ws://127.0.0.1:{server.port}", "token", "faults", spool=False,
                     backoff_initial=0.05, backoff_max=0.2, ack_timeout=0.5)
    client.log_step(0, {"loss": 1.0})
    assert not client.flush(timeout=4)
    assert client.stats["ack_timeouts"] >= 2  # it kept trying, session after session
    client.close(timeout=1)


def test_a_close_4500_is_retried_and_nothing_is_lost(
        fake: Callable[[Behaviour], FakeIngest]) -> None:
    server = fake(lambda n: "close4500" if n <= 2 else "ack")
    ok, stats = log_and_flush(server)
    assert ok, stats
    assert stats["reconnects"] >= 2 and stats["pending"] == 0
