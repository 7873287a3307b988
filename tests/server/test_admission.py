"""Limits that hold (ingest.write.admission): a connection that pipelines frames past its backlog
bound is closed with 4429 instead of being read into memory; a token's budget is shared by all
its connections and its HTTP requests, and another token is untouched by it; the ingest writer
takes jobs in turns by token."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import orjson
import pytest
from channels.db import database_sync_to_async
from django.test import Client

from ingest.write import admission, auth
from ingest.write.auth import create_token
from tests.server.conftest import ingest_communicator, settled, step_msg

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _fresh_budgets() -> Any:
    admission._tokens.clear()  # budgets are made from the settings of their first use
    yield
    admission._tokens.clear()


def test_the_writer_takes_jobs_in_turns_by_token() -> None:
    fair = admission.FairExecutor("test-fair")
    running, gate, order = threading.Event(), threading.Event(), []

    def hold() -> None:  # holds the worker while the queues fill
        running.set()
        gate.wait()

    first = fair.submit_to("a", hold)
    assert running.wait(10)
    jobs = [fair.submit_to("a", order.append, f"a{i}") for i in range(4)]
    jobs += [fair.submit_to("b", order.append, "b0"), fair.submit_to("c", order.append, "c0"),
             fair.submit_to("b", order.append, "b1")]
    gate.set()
    for job in [first, *jobs]:
        job.result(10)
    # a's four jobs came first, yet b and c each waited behind one of a's at most
    assert order == ["a0", "b0", "c0", "a1", "b1", "a2", "a3"]


async def test_a_pipelined_flood_on_one_connection_is_closed_with_4429(token: str) -> None:
    comm = ingest_communicator(token)
    assert (await comm.connect())[0]
    for i in range(9000):  # sent without waiting for replies, as fast as it goes
        await comm.send_to(text_data=orjson.dumps(step_msg(i, {"x": 1.0})).decode())
    closed = None
    for _ in range(9000):
        out = await comm.receive_output(10)
        if out["type"] == "websocket.close":
            closed = out["code"]
            break
    assert closed == 4429
    await comm.disconnect()
    await settled()


async def test_a_tokens_budget_is_shared_by_its_connections_and_http(
        transactional_db: None, settings: Any) -> None:
    settings.TELESCOPE_TOKEN_MESSAGES_PER_SECOND, settings.TELESCOPE_TOKEN_RATE_BURST = 0.01, 6
    flood = (await database_sync_to_async(create_token)("a"))[1]
    calm = (await database_sync_to_async(create_token)("b"))[1]
    comms = [ingest_communicator(flood) for _ in range(2)]
    for comm in comms:
        assert (await comm.connect())[0]
    closes = 0
    for i in range(4):  # 8 frames of one token: 6 are in its budget, wherever they come from
        for k, comm in enumerate(comms):
            await comm.send_to(text_data=orjson.dumps(step_msg(i, {"x": 1.0}, mid=f"{k}-{i}"))
                               .decode())
            out = await comm.receive_output(10)
            closes += out["type"] == "websocket.close"
            if out["type"] == "websocket.close":
                assert out["code"] == 4429
    assert closes == 2  # each connection alone was far below its own limit
    body = orjson.dumps(step_msg(0, {"x": 1.0}, mid="http"))

    @database_sync_to_async
    def post(token: str) -> Any:
        return Client().post("/api/ingest", body, content_type="application/json",
                             HTTP_AUTHORIZATION=f"Bearer {token}")

    over = await post(flood)
    assert over.status_code == 429 and over["Retry-After"] == "1"
    other = await post(calm)
    assert other.status_code == 200 and len(other.json()["acks"]) == 1
    for comm in comms:
        await comm.disconnect()
    await settled()


async def test_a_tokens_unapplied_bytes_are_bounded(token: str, settings: Any) -> None:
    settings.TELESCOPE_TOKEN_BACKLOG_BYTES = 4096
    comm = ingest_communicator(token)
    assert (await comm.connect())[0]
    big = step_msg(0, {f"k{i}": float(i) for i in range(400)})
    await comm.send_to(text_data=orjson.dumps(big).decode())
    assert (await comm.receive_output(10)) == {"type": "websocket.close", "code": 4429}
    await comm.disconnect()


async def test_a_closed_connections_unapplied_frames_are_dropped_at_once(
        token: str, monkeypatch: Any) -> None:
    # The consumer ends in reference cycles that only the garbage collector frees; frames left
    # in its inbox would stay in memory, past the token's bound, until a collection runs.
    from ingest.write import consumers

    gate = threading.Event()
    real = consumers.handle_frames

    def held_up(*args: Any) -> Any:
        gate.wait(10)  # the writer is busy: frames pile up in the connection's inbox
        return real(*args)

    ended: list[consumers.IngestConsumer] = []
    disconnect = consumers.IngestConsumer.disconnect

    async def recorded(self: consumers.IngestConsumer, code: int) -> None:
        await disconnect(self, code)
        ended.append(self)

    monkeypatch.setattr(consumers, "handle_frames", held_up)
    monkeypatch.setattr(consumers.IngestConsumer, "disconnect", recorded)
    comm = ingest_communicator(token)
    assert (await comm.connect())[0]
    for i in range(20):
        await comm.send_to(text_data=orjson.dumps(step_msg(i, {"x": 1.0})).decode())
    await comm.disconnect()
    gate.set()
    (consumer,) = ended
    assert consumer.inbox.qsize() == 0
    assert consumer.held_bytes == 0
    assert consumer.token is not None and consumer.token.backlog_bytes == 0
    # A group the writer had taken (none, when the disconnect came first) may still be applied
    # on its thread: the test's database is emptied only after it (a flush racing it
    # deadlocks). The writer runs a token's jobs in order, so one more returns after it.
    drained = admission.ingest_executor().submit_to(auth.digest(token), lambda: None)
    await asyncio.wait_for(asyncio.wrap_future(drained), 10)
    await settled()
