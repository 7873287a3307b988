"""The sender without the real server: what log calls seal into the outbox (batching by size
and time, ids), garbage input, caller-side cost, and the protocol behaviours a scripted
WebSocket server can force (pipelining, error replies, lost acks)."""

from __future__ import annotations

import asyncio
import logging
import resource
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import msgpack
import numpy as np
import orjson
import pytest
from websockets.asyncio.server import ServerConnection, serve

from devtools.live_server import free_port
from trainer_hooks.rewards import RewardResult
from trainer_hooks.transport.client import Client, connect, ingest_url
from trainer_hooks.wire import protocol as p
from trainer_hooks.wire.texts import PackedText


def offline(tmp_path: Path, url: str | None = None, **options: Any) -> Client:
    """A client whose server is never there: everything stays in its outbox (each body
    written as it is sealed: `spill_after=0`, so the file shows what was sealed when;
    tests/hooks_sender/test_staging.py covers the default)."""
    options.setdefault("spool_dir", tmp_path / "spool")
    options.setdefault("spill_after", 0)
    return connect(url or f"ws://127.0.0.1:{free_port()}", "tok", "run-1", backoff_max=0.2,
                   **options)


def spooled(client: Client, *, starts: bool = False, raw: bool = False
            ) -> list[dict[str, Any]]:
    """The messages in a client's outbox, in order, decoded and validated (without the
    run.start every starting client sends first, unless `starts`), their columns as lists
    (`as_lists`) unless `raw`."""
    assert client.spool_path is not None
    uri = f"file:{client.spool_path}?mode=ro"
    with closing(sqlite3.connect(uri, uri=True)) as db:
        rows = db.execute("SELECT fmt, body FROM outbox ORDER BY seq").fetchall()
    out = []
    for fmt, body in rows:
        obj = p.decode_frame(body if fmt == "msgpack" else body.decode(), binary=fmt == "msgpack")
        p.validate_message(obj)
        if starts or obj["type"] != "run.start":
            out.append(obj if raw else as_lists(obj))
    return out


def as_lists(obj: Any) -> Any:
    """A decoded message with its typed arrays (trainer_hooks.wire.arrays), packed text
    columns (trainer_hooks.wire.texts) and dictionary-encoded sample labels as lists."""
    if isinstance(obj, dict):
        out = {k: as_lists(v) for k, v in obj.items()}
        if out.get("type") == "samples":
            p.unpack_labels(out)
        return out
    if isinstance(obj, PackedText):
        return obj.values()
    return obj.tolist() if isinstance(obj, np.ndarray) else obj


@pytest.fixture
def client(tmp_path: Path) -> Iterator[Client]:
    c = offline(tmp_path, max_batch_samples=100)
    yield c
    c.close(timeout=0.1)


def test_urls_point_at_the_ingest_endpoint() -> None:
    assert ingest_url("ws://h:8000") == "ws://h:8000/ws/ingest/"
    assert ingest_url("https://h/") == "wss://h/ws/ingest/"
    assert ingest_url("ws://h/custom/") == "ws://h/custom/"
    with pytest.raises(ValueError):
        ingest_url("127.0.0.1:8000")


def test_setup_mistakes_raise_at_connect(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        connect("ws://h", "t", "bad//run")
    with pytest.raises(TypeError):
        connect("ws://h", "t", "r", max_batch_sample=1)  # a typo in an option


def test_samples_are_batched_by_size_with_unique_ordered_ids(client: Client) -> None:
    ids = [f"s{i}" for i in range(250)]
    client.log_samples(3, sample_id=ids, group_id=[i // 5 for i in range(250)],
                       reward=np.linspace(0, 1, 250), env="countdown")
    client.log_step(3, {"loss": 0.5, "entropy": np.float32(2.0)})
    client.log_samples(4, sample_id=["a", "b"], group_id=["g", "g"], reward=[1, 0],
                       metrics={"correct": [1, 0]}, stop_reason=["length", "stop"])
    assert client.sync(5)
    msgs = spooled(client)
    samples = [m for m in msgs if m["type"] == "samples"]
    assert [len(m["reward"]) for m in samples] == [100, 100, 52]
    assert [i for m in samples for i in m["sample_id"]] == ids + ["a", "b"]
    assert samples[-1]["step"] == [3] * 50 + [4, 4]
    assert samples[-1]["stop_reason"] == [None] * 50 + ["length", "stop"]
    [step] = [m for m in msgs if m["type"] == "step"]
    assert step["metrics"] == {"loss": 0.5, "entropy": 2.0} and step["time"] > 1e9
    prefixes = {m["id"].rsplit("-", 1)[0] for m in msgs}
    counters = [int(m["id"].rsplit("-", 1)[1]) for m in msgs]
    assert len(prefixes) == 1 and len(next(iter(prefixes))) == 12
    assert counters == sorted(counters) and len(set(counters)) == len(msgs)


def test_copy_columns_protects_columns_the_caller_changes_in_place(tmp_path: Path) -> None:
    # A long poll interval: the sender thread reads the queue only at sync(), after the
    # caller has already overwritten everything it passed.
    client = offline(tmp_path, copy_columns=True, poll_interval=3600.0)
    try:
        reward, ids, correct = np.array([0.25, 0.75]), ["a", "b"], [1.0, 0.0]
        metrics = {"correct": correct}
        step_metrics = {"loss": 0.5}
        client.log_samples(7, sample_id=ids, group_id="g", reward=reward, metrics=metrics)
        client.log_step(7, step_metrics)
        reward[:] = -1.0
        ids[0] = "zzz"
        correct[1] = 9.0
        metrics["correct"] = [5.0, 5.0]
        step_metrics["loss"] = 99.0
        assert client.sync(5)
        msgs = spooled(client)
    finally:
        client.close(timeout=0.1)
    [samples] = [m for m in msgs if m["type"] == "samples"]
    assert samples["reward"] == [0.25, 0.75] and samples["sample_id"] == ["a", "b"]
    assert samples["metrics"] == {"correct": [1.0, 0.0]}
    [step] = [m for m in msgs if m["type"] == "step"]
    assert step["metrics"] == {"loss": 0.5}  # the step's dict is copied on every path


def test_samples_are_sealed_by_time_without_a_flush(tmp_path: Path) -> None:
    fast = offline(tmp_path, flush_interval=0.2, spool_name="fast")
    slow = offline(tmp_path, flush_interval=30.0, spool_name="slow")
    try:
        for c in (fast, slow):
            c.log_samples(1, sample_id=[1, 2], group_id=[1, 1], reward=[0.0, 1.0])
        t0 = time.monotonic()
        while not spooled(fast) and time.monotonic() - t0 < 5:
            time.sleep(0.02)
        waited = time.monotonic() - t0
        assert [len(m["reward"]) for m in spooled(fast)] == [2]
        assert 0.1 < waited < 1.0
        time.sleep(0.3)
        assert spooled(slow) == []  # still batching
        assert slow.sync(5) and [len(m["reward"]) for m in spooled(slow)] == [2]
    finally:
        fast.close(0.1)
        slow.close(0.1)


def test_rewards_become_columns_with_tool_metrics(client: Client) -> None:
    results = [RewardResult(1.0, {"correct": 1.0, "total_tool_calls": 2}),
               RewardResult(0.0, {"correct": 0.0})]
    client.log_rewards(9, results, sample_id=["x", "y"], group_id="g", env="tools",
                       advantage=[0.5, -0.5])
    assert client.sync(5)
    [msg] = spooled(client)
    assert msg["reward"] == [1.0, 0.0] and msg["advantage"] == [0.5, -0.5]
    assert msg["metrics"]["total_tool_calls"][0] == 2.0 and np.isnan(
        msg["metrics"]["total_tool_calls"][1])
    assert msg["env"] == "tools" and msg["group_id"] == ["g", "g"]


class Weird:
    def __iter__(self) -> Any:
        raise RuntimeError("boom")


GARBAGE: list[Callable[[Client], None]] = [
    lambda c: c.log_step(None, None),
    lambda c: c.log_step("three", {"a": 1}),
    lambda c: c.log_step(-1, {"a": 1}),
    lambda c: c.log_step(1, "not a dict"),  # type: ignore[arg-type]
    lambda c: c.log_step(2, {"": 1.0, "x": object()}),  # no usable metric left
    lambda c: c.log_samples(1),
    lambda c: c.log_samples(1, sample_id=[1], group_id=[1], reward=["high"]),
    lambda c: c.log_samples(1, sample_id=[1, 2], group_id=[1], reward=[1, 2]),
    lambda c: c.log_samples(1, sample_id=[1], group_id=[1], reward=[1], metrics=5),
    lambda c: c.log_samples(1, sample_id=[1], group_id=[1], reward=[1], discard_reason="lost"),
    lambda c: c.log_samples(1.5, sample_id=[1], group_id=[1], reward=[1]),
    lambda c: c.log_samples(1, sample_id=Weird(), group_id=[1], reward=[1]),
    lambda c: c.log_rewards(1, None),
    lambda c: c.log_rewards(1, [object()], sample_id=[1], group_id=[1]),
]


def test_log_calls_never_raise_on_garbage_and_count_it(
        client: Client, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="trainer_hooks"):
        for call in GARBAGE:
            call(client)
            call(client)
        client.log_step(5, {"ok": 1.0, "bad/": 2.0, "text": "x", "long": "y" * 129})
        client.log_samples(5, sample_id=[1], group_id=[1], reward=[1.0],
                           metrics={"fine": [1.0], "bad": ["x"]})
        assert client.sync(5)
    stats = client.stats
    assert stats["invalid_calls"] == 2 * len(GARBAGE)
    assert stats["invalid_values"] == 2 * 2 + 3  # the two bad keys of step 2, then three
    assert {e["what"] for e in client.not_stored if e["reason"] == "invalid value"} == {
        "step 2: metric 'x'", "step 5: metric 'long'"}
    msgs = spooled(client)
    assert [(m["type"], m.get("metrics")) for m in msgs] == [
        ("step", {"ok": 1.0, "text": "x"}), ("samples", {"fine": [1.0]})]  # a string is fine
    assert not client.flush(0.2)  # nothing acknowledged (no server), and calls were lost
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == len(set(messages))  # each problem logged once


def test_log_calls_after_close_are_counted_and_named(tmp_path: Path) -> None:
    c = offline(tmp_path, join=True)  # a joining client sends no run.start
    assert c.close(0.1)  # nothing was logged: nothing waits for an ack
    c.log_step(1, {"a": 1.0})
    assert c.stats["dropped_closed"] == 1 and c.stats["not_stored"] == 1
    assert c.not_stored == [{"reason": "closed", "what": "log_step(1): 1 metrics", "count": 1,
                             "why": "logged after close()"}]
    assert c.close() is True  # idempotent: the answer of the first close


@pytest.mark.parametrize("sender", ["thread", "process"])
def test_a_full_queue_makes_the_caller_wait_instead_of_dropping(tmp_path: Path,
                                                                  sender: str) -> None:
    # thread: the call queue holds 10 calls; process: the shared memory holds ~50
    c = offline(tmp_path, max_queue=10, poll_interval=5.0, sender=sender, ring_bytes=4096)
    try:
        for i in range(500):
            c.log_step(i, {"a": float(i)})
        assert c.sync(10)
        stats = c.stats
        assert stats["dropped_queue_full"] == 0 and stats["not_stored"] == 0
        assert stats["waited_queue_full"] > 0
        assert [m["metrics"]["a"] for m in spooled(c)] == [float(i) for i in range(500)]
    finally:
        c.close(0.1)


def test_a_new_experiment_starts_and_every_message_carries_its_incarnation(
        tmp_path: Path) -> None:
    url = f"ws://127.0.0.1:{free_port()}"
    first = offline(tmp_path, url, config={"lr": 0.1})
    first.log_step(0, {"a": 1.0})
    assert first.sync(10)
    msgs = spooled(first, starts=True)
    first.close(0.1)
    assert [m["type"] for m in msgs] == ["run.start", "step"]
    assert msgs[0]["resume"] is False and msgs[0]["config"] == {"lr": 0.1}
    inc = msgs[0]["incarnation"]
    assert len(inc) == 32 and all(m["incarnation"] == inc for m in msgs)

    again = offline(tmp_path, url)  # the same script run again: another attempt
    resumed = offline(tmp_path, url, resume=True)  # (the next slot; it remembers nothing)
    for c in (again, resumed):
        assert c.sync(10)
    [start_again] = spooled(again, starts=True)[-1:]
    assert start_again["incarnation"] != inc and start_again["resume"] is False
    again.close(0.1)
    resumed.close(0.1)
    third = offline(tmp_path, url, resume=True)  # slot-0 again: resumes what it sent last
    assert third.sync(10)
    start = spooled(third, starts=True)[-1]
    assert start["resume"] is True and start["incarnation"] == start_again["incarnation"]
    third.close(0.1)
    other = offline(tmp_path)  # another server: another outbox, nothing of these replayed
    assert other.spool_path is not None and third.spool_path is not None
    assert other.spool_path.parent != third.spool_path.parent and other.stats["replayed"] == 0
    other.close(0.1)
    with pytest.raises(ValueError, match="join"):
        offline(tmp_path, join=True, resume=True)


# ---------------------------------------------------------------- a scripted server


class ScriptedServer:
    """A WebSocket server on a thread. `reply(msg, n)` returns "ack", "error", "abort"
    (drop the TCP connection without replying), an int close code or an error reply (a
    dict); acks may be delayed.
    Batch frames get a list of replies. run.start and barrier messages are acked at once and
    kept apart (`control`), so `received` holds what the test logged."""

    def __init__(self, reply: Callable[[dict[str, Any], int], Any], ack_delay: float = 0.0,
                 token: str = "tok") -> None:
        self.reply, self.ack_delay, self.token = reply, ack_delay, token
        self.received: list[dict[str, Any]] = []
        self.control: list[dict[str, Any]] = []
        self.frames: list[int] = []  # messages per frame
        self.outstanding = self.max_outstanding = self.connections = 0
        self.port = 0
        self.ready = threading.Event()
        self.thread = threading.Thread(target=asyncio.run, args=(self.main(),), daemon=True)

    async def main(self) -> None:
        self.stop = asyncio.get_running_loop().create_future()
        self.loop = asyncio.get_running_loop()
        async with serve(self.handler, "127.0.0.1", 0, compression=None) as server:
            self.port = server.sockets[0].getsockname()[1]
            self.ready.set()
            await self.stop

    async def handler(self, ws: ServerConnection) -> None:
        self.connections += 1
        if ws.request and ws.request.headers.get("Authorization") != f"Bearer {self.token}":
            await ws.close(4401)
            return
        async for frame in ws:
            obj = msgpack.unpackb(frame) if isinstance(frame, bytes) else None
            assert obj is not None
            batch = isinstance(obj, list)
            replies = []
            for msg in obj if batch else [obj]:
                if msg["type"] in ("run.start", "barrier"):
                    self.control.append(msg)
                    replies.append({"type": "ack", "id": msg["id"]})
                    continue
                self.received.append(msg)
                action = self.reply(msg, len(self.received))
                if action == "abort":
                    ws.transport.abort()
                    return
                if isinstance(action, int):
                    await ws.close(action)
                    return
                if isinstance(action, dict):  # an error reply of the test's own
                    replies.append({**action, "id": msg["id"]})
                    continue
                replies.append({"type": "ack", "id": msg["id"]} if action == "ack" else
                               {"type": "error", "id": msg["id"], "code": "invalid",
                                "field": "step", "message": "no"})
            self.frames.append(len(replies))
            self.outstanding += 1
            self.max_outstanding = max(self.max_outstanding, self.outstanding)
            asyncio.get_running_loop().create_task(
                self.answer(ws, replies if batch else replies[0]))

    async def answer(self, ws: ServerConnection, reply: Any) -> None:
        await asyncio.sleep(self.ack_delay)
        self.outstanding -= 1
        try:
            await ws.send(orjson.dumps(reply).decode())
        except Exception:  # noqa: BLE001 - the connection went away
            pass

    def __enter__(self) -> ScriptedServer:
        self.thread.start()
        self.ready.wait(10)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.loop.call_soon_threadsafe(self.stop.set_result, None)
        self.thread.join(10)

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"


def test_messages_are_pipelined_within_the_in_flight_bound(tmp_path: Path) -> None:
    # Acks take 0.3 s while steps are logged for ~0.5 s: the sender (one frame per pump pass,
    # every 50 ms) must have several frames out at once, and never more than max_in_flight.
    with ScriptedServer(lambda m, n: "ack", ack_delay=0.3) as server:
        c = connect(server.url, "tok", "r", spool_dir=tmp_path, max_in_flight=3)
        assert c.flush(10)  # run.start stored: the sender is connected
        for step in range(100):
            c.log_step(step, {"a": float(step)})
            time.sleep(0.005)
        assert c.flush(30)
        assert c.close(10)
    assert server.max_outstanding > 1  # did not wait for each ack
    assert server.max_outstanding <= 3
    assert [m["step"] for m in server.received] == list(range(100))


def test_a_burst_of_small_messages_travels_in_batch_frames(tmp_path: Path) -> None:
    with ScriptedServer(lambda m, n: "error" if n == 500 else "ack", ack_delay=0.01) as server:
        c = connect(server.url, "tok", "r", spool_dir=tmp_path)
        for step in range(2000):
            c.log_step(step, {"a": float(step)})
        assert not c.flush(30)  # one was rejected: named in the ledger
        stats = c.stats
        assert c.close(5)
    assert [m["step"] for m in server.received] == list(range(2000))
    assert max(server.frames) > 50 and len(server.frames) < 200
    assert stats["acked"] == 2000 - 1 + 1 and stats["rejected"] == 1  # + run.start
    assert stats["frames"] == len(server.frames) - 1  # the barrier of close() came after
    [lost] = c.not_stored
    assert lost["reason"] == "rejected by the server" and lost["what"].startswith("step 499:")
    assert lost["why"] == "invalid (field step): no"


def test_an_error_reply_drops_that_message_once(tmp_path: Path,
                                                caplog: pytest.LogCaptureFixture) -> None:
    def reply(msg: dict[str, Any], n: int) -> str:
        return "error" if msg.get("step") == 3 else "ack"

    with ScriptedServer(reply) as server, caplog.at_level(logging.WARNING):
        c = connect(server.url, "tok", "r", spool_dir=tmp_path)
        for step in range(6):
            c.log_step(step, {"a": 1.0})
        assert not c.flush(10)  # delivered, but one message was rejected
        c.log_step(6, {"a": 1.0})
        assert c.flush(10)  # nothing lost since the previous flush
        stats = c.stats
        assert c.close(5)
    assert [m["step"] for m in server.received] == list(range(7))  # never retried
    assert stats["rejected"] == 1 and stats["acked"] == 6 + 1 and stats["pending"] == 0
    assert sum("rejected" in r.getMessage() for r in caplog.records) == 1


def test_a_server_older_than_packed_text_gets_the_text_again_as_lists(tmp_path: Path) -> None:
    """A server that does not know packed text (trainer_hooks.wire.texts) refuses the column
    as a wrong type: the message goes again with its text as lists, so no sample is lost."""
    def reply(msg: dict[str, Any], n: int) -> Any:
        if isinstance(msg.get("completion"), msgpack.ExtType):
            return {"type": "error", "code": "wrong_type", "field": "completion",
                    "message": "completion must be a list"}
        return "ack"

    with ScriptedServer(reply) as server:
        c = connect(server.url, "tok", "r", spool_dir=tmp_path)
        c.log_samples(0, sample_id=[1, 2], group_id=0, reward=[1.0, 0.0],
                      completion=["yes", None])
        c.log_samples(1, sample_id=[3], group_id=1, reward=[0.5])
        assert c.flush(10), c.not_stored
        stats = c.stats
        assert c.close(5)
    first, again = server.received  # (both calls in one message)
    assert isinstance(first["completion"], msgpack.ExtType)  # packed first
    assert again["id"] == first["id"] and again["completion"] == ["yes", None, None]
    assert again["reward"] == first["reward"]  # the same samples
    assert stats["text_as_lists"] == 1 and stats["rejected"] == 0 and c.not_stored == []


def test_unacknowledged_messages_are_resent_with_their_ids_after_a_drop(
        tmp_path: Path) -> None:
    def reply(msg: dict[str, Any], n: int) -> str:
        return "abort" if n == 40 else "ack"

    with ScriptedServer(reply, ack_delay=0.01) as server:
        c = connect(server.url, "tok", "r", spool_dir=tmp_path, backoff_initial=0.05)
        for step in range(100):
            c.log_step(step, {"a": float(step)})
        assert c.flush(20)
        stats = c.stats
        assert c.close(5)
    ids = [m["id"] for m in server.received]
    assert server.connections == 2 and stats["reconnects"] >= 1
    resent = set(ids[:40]) & set(ids[40:])
    assert resent and len(ids) == 100 + len(resent)  # unacked ones came again, once
    assert len({(m["id"], m["step"]) for m in server.received}) == 100  # with the same ids
    assert sorted({m["step"] for m in server.received}) == list(range(100))


def test_a_4413_splits_the_large_message_not_the_oldest_one_awaiting_its_ack(
        tmp_path: Path) -> None:
    # A server that reads on before it replies (acks take 0.5 s) refuses the wide step while
    # the small steps sent before it still await their acks: the wide one is split, no small
    # one is blamed (a one-key step cannot be split: it would be dropped).
    def reply(msg: dict[str, Any], n: int) -> str | int:
        return 4413 if len(msg["metrics"]) > 100 and "." not in msg["id"] else "ack"

    wide = {f"wide/{i}": float(i) for i in range(2000)}
    with ScriptedServer(reply, ack_delay=0.5) as server:
        c = connect(server.url, "tok", "r", spool_dir=tmp_path, backoff_initial=0.05)
        for step in range(5):
            c.log_step(step, {"a": float(step)})
            time.sleep(0.06)  # one pump pass each: frames of their own
        c.log_step(5, wide)
        assert c.flush(30), c.not_stored
        stats = c.stats
        assert c.close(5)
    assert stats["splits"] == 1 and c.not_stored == []
    assert {m["step"] for m in server.received} == set(range(6))
    halves = [m for m in server.received if m["step"] == 5 and "." in m["id"]]
    assert [m["id"].rsplit(".", 1)[1] for m in halves] == ["0", "1"]
    assert {k: v for m in halves for k, v in m["metrics"].items()} == wide


def test_a_finished_run_leaves_no_outbox_behind_once_everything_is_acknowledged(
        tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    with ScriptedServer(lambda m, n: "ack") as server:
        trainer = connect(server.url, "tok", "r", spool_dir=spool)
        worker = connect(server.url, "tok", "r", spool_dir=spool, join=True)
        for c in (trainer, worker):
            c.log_samples(1, sample_id=["a", "b"], group_id=0, reward=[0.0, 1.0])
        assert trainer.spool_path is not None and worker.spool_path is not None
        run_dir, slot = trainer.spool_path.parent, trainer.spool_path.stem
        assert worker.close(10)  # a joined client: its slot goes, the trainer's stays
        assert {f.name.split(".")[0] for f in run_dir.iterdir()} == {slot}
        assert trainer.close(10, status="finished")
    assert list(spool.iterdir()) == []  # the run's directory went with its last slot


@pytest.mark.parametrize("status", [None, "failed"])
def test_an_outbox_stays_for_a_resume_or_a_sync(tmp_path: Path, status: str | None) -> None:
    """A run left open or failed may be resumed (the outbox remembers the samples it sealed);
    a finished one whose messages were not all acknowledged waits for `telescope sync`."""
    with ScriptedServer(lambda m, n: "ack") as server:
        c = connect(server.url, "tok", "r", spool_dir=tmp_path)
        c.log_samples(1, sample_id=["a"], group_id=0, reward=[1.0])
        assert c.close(10, status=status)
    assert c.spool_path is not None and c.spool_path.exists()
    undelivered = offline(tmp_path)
    undelivered.log_step(0, {"a": 1.0})
    assert not undelivered.close(0.5, status="finished")
    assert undelivered.spool_path is not None and undelivered.spool_path.exists()
    assert [m["type"] for m in spooled(undelivered)][:2] == ["step", "run.end"]


def test_a_bad_token_stops_the_client_and_keeps_the_outbox(tmp_path: Path,
                                                           caplog: pytest.LogCaptureFixture
                                                           ) -> None:
    with ScriptedServer(lambda m, n: "ack", token="good") as server, \
            caplog.at_level(logging.ERROR):
        c = connect(server.url, "bad", "r", spool_dir=tmp_path)
        c.log_step(1, {"a": 1.0})
        assert not c.flush(5)
        time.sleep(0.3)
        assert server.connections == 1  # no reconnect loop
        assert not c.close(1)
        other = connect(server.url, "good", "r", spool_dir=tmp_path)  # another project's
        assert other.stats["replayed"] == 0 and other.close(5)
        server.token = "bad"  # the token is valid now
        again = connect(server.url, "bad", "r", spool_dir=tmp_path)
        assert again.stats["replayed"] == 3  # the first client's run.start, step and barrier
        assert again.close(5)
    assert [m["step"] for m in server.received] == [1]
    assert [m["step"] for m in server.received] == [1]
    assert any("4401" in r.getMessage() for r in caplog.records)


def fill_disk(c: Client, pages: int = 0) -> None:
    """A full disk, for real: the sender's outbox may grow by at most `pages` pages — in the
    sender thread's SQLite (max_page_count), or for the sender process its file size limit
    (RLIMIT_FSIZE: no file of it may grow)."""
    if c.helper_pid is None:
        outbox_db = c._engine.outbox._db  # type: ignore[union-attr]
        count = outbox_db.execute("PRAGMA page_count").fetchone()[0]
        outbox_db.execute(f"PRAGMA max_page_count = {count + pages}")
        return
    assert c.spool_path is not None
    size = max(f.stat().st_size for f in c.spool_path.parent.glob(c.spool_path.name + "*"))
    limit = size + pages * 4200  # (a page of the WAL and its frame header)
    resource.prlimit(c.helper_pid, resource.RLIMIT_FSIZE, (limit, limit))


@pytest.mark.parametrize("sender", ["thread", "process"])
def test_a_failing_outbox_file_falls_back_to_memory(tmp_path: Path,
                                                    caplog: pytest.LogCaptureFixture,
                                                    sender: str) -> None:
    with ScriptedServer(lambda m, n: "ack") as server, caplog.at_level(logging.ERROR):
        # (every body written before it is sent; test_staging.py fails a spill instead)
        c = connect(server.url, "tok", "r", spool_dir=tmp_path, spill_after=0, sender=sender)
        assert c.flush(10)  # run.start stored: the outbox is idle
        fill_disk(c)
        c.log_step(0, {f"key/{i}": float(i) for i in range(5000)})  # more than a page
        for step in range(1, 5):
            c.log_step(step, {"a": 1.0})
        assert c.flush(10)
        stats = c.stats
        assert c.close(5)
    assert stats["spool_errors"] == 1 and c.spool_path is None
    assert [m["step"] for m in server.received] == list(range(5))
    assert any("continuing in memory only" in r.getMessage() for r in caplog.records)


def test_a_pump_pass_ends_on_its_time_budget_so_sealed_messages_leave_during_a_flood(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A flood of queued calls is sealed a few at a time (each pass at most PUMP_SECONDS), so
    the connection sends the first messages while the rest are still being sealed."""
    from trainer_hooks.transport import sealer as sealer_mod
    from trainer_hooks.transport.batching import SampleBatcher
    from trainer_hooks.transport.bookkeeping import Bookkeeping
    from trainer_hooks.transport.options import SenderOptions
    from trainer_hooks.transport.outbox import Outbox
    from trainer_hooks.transport.queue import CallQueue, StepCall
    from trainer_hooks.transport.resume import ResumeFilter

    options, calls, outbox = SenderOptions(), CallQueue(10_000), Outbox(None)
    books = Bookkeeping(logging.getLogger("test"))
    sealer = sealer_mod.Sealer(
        options, calls, outbox, SampleBatcher(options.max_batch_samples,
                                              options.max_batch_bytes),
        ResumeFilter(outbox, books, run="r", resume=False, keep_steps=options.dedupe_steps),
        books, run="r", incarnation="i")
    for step in range(1000):
        calls.entries.append(StepCall(step, {"loss": 1.0}, time.time()))
    monkeypatch.setattr(sealer_mod, "PUMP_SECONDS", 0.0)  # the budget is spent at once
    assert sealer.pump_once().written == sealer_mod.PUMP_TAKE
    assert len(calls) == 1000 - sealer_mod.PUMP_TAKE
    monkeypatch.setattr(sealer_mod, "PUMP_SECONDS", 60.0)  # ... or never: PUMP_BATCH caps it
    assert sealer.pump_once().written == min(sealer_mod.PUMP_BATCH, 1000 - sealer_mod.PUMP_TAKE)
    assert outbox.rows == 1000
