"""Spans, events and gauges from the caller to the outbox: what `client.span`, `log_events` and
`log_gauges` seal (read back from a real client's outbox and validated by the wire's own
validator), the recorder's size and age flushes, rows left out and named, concurrent callers,
a 4413 split, and `Timeline(client=...)` on one rank and on two real gloo ranks."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgpack
import numpy as np
import pytest
import torch

from tests.hooks.dist_helpers import run_world
from tests.hooks_sender.test_sender import ScriptedServer, offline, spooled
from trainer_hooks.metrics.timing import Timeline
from trainer_hooks.timeline.recorder import TimelineRecorder
from trainer_hooks.timeline.spans import Span
from trainer_hooks.transport.client import Client, connect
from trainer_hooks.wire import protocol as p


@pytest.fixture
def client(tmp_path: Path) -> Iterator[Client]:
    c = offline(tmp_path)
    yield c
    c.close(timeout=0.1)


def of_type(client: Client, kind: str) -> list[dict[str, Any]]:
    assert client.sync(10)
    return [m for m in spooled(client) if m["type"] == kind]


def column(messages: list[dict[str, Any]], name: str) -> list[Any]:
    """One column over messages, a one-for-all value repeated for its rows, a
    dictionary-encoded label column decoded, NaN (a typed array's null) as None."""

    def rows(value: Any) -> Any:
        if isinstance(value, dict):
            return [None if c < 0 else value["values"][c] for c in list(value["codes"])]
        return value

    out: list[Any] = []
    for m in messages:
        n = max((len(v) for v in map(rows, m.values()) if isinstance(v, list)), default=1)
        value = rows(m.get(name))
        out.extend(value if isinstance(value, list) else [value] * n)
    return [None if isinstance(v, float) and v != v else v for v in out]


class Collected:
    """A recorder's `send` and `problems`: the messages it sent, validated, and its reports."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self.left: list[tuple[str, int, str]] = []
        self.arrived = threading.Event()

    def __call__(self, message: dict[str, Any]) -> None:
        framed = {"v": 1, "id": f"m{len(self.messages)}", "run": "r", **message}
        p.validate_message(p.decode_frame(p.encode(framed, "msgpack"), binary=True))
        self.messages.append(message)
        self.arrived.set()

    def left_out(self, what: str, count: int, why: str) -> None:
        self.left.append((what, count, why))

    def failed(self, where: str, exc: BaseException) -> None:
        raise AssertionError(f"{where}: {exc!r}")


# ---------------------------------------------------------------- the client


def test_a_span_records_its_block_and_the_fields_set_inside(client: Client) -> None:
    before = time.time()
    with client.span("generation", source="inference", server=0, slot=3, step=7,
                     sample_id="s-1", group_id=4) as sp:
        sp.tokens = 128
        sp.status = "discarded"
    with pytest.raises(KeyError), client.span("compute_reward", source="reward"):
        raise KeyError("the block's own exception goes on")
    after = time.time()
    [msg] = of_type(client, "events")
    assert msg["name"] == ["generation", "compute_reward"]
    assert msg["source"] == ["inference", "reward"]
    assert before <= msg["start"][0] <= msg["end"][0] <= msg["start"][1] <= msg["end"][1] \
        <= after
    assert column([msg], "tokens")[0] == 128 and column([msg], "status") == ["discarded", None]
    assert column([msg], "server")[0] == 0 and column([msg], "slot")[0] == 3
    assert column([msg], "sample_id") == ["s-1", None] and column([msg], "step")[0] == 7
    assert client.stats["logged_events"] == 2


def test_log_events_takes_scalars_lists_arrays_and_tensors(client: Client) -> None:
    t0 = 1_700_000_000.0
    client.log_events(name="forward", start=np.array([t0, t0 + 1]), end=[t0 + 0.5, t0 + 1.5],
                      rank=torch.tensor([0, 1]), step=np.int64(3), tokens=torch.tensor(9))
    client.log_events(name="training_loop_start", start=t0 - 10, source="orchestrator")
    with client.span("backward", rank=1, step=3):
        pass
    [msg] = of_type(client, "events")
    # spans first, then the calls, in order
    assert msg["name"] == ["backward", "forward", "forward", "training_loop_start"]
    assert msg["start"][1:] == [t0, t0 + 1, t0 - 10]
    assert column([msg], "end")[1:] == [t0 + 0.5, t0 + 1.5, None]
    assert column([msg], "rank") == [1, 0, 1, None]
    assert column([msg], "step") == [3, 3, 3, None]
    assert column([msg], "tokens") == [None, 9, 9, None]
    assert column([msg], "source") == ["trainer", "trainer", "trainer", "orchestrator"]


def test_log_gauges_defaults_time_to_now(client: Client) -> None:
    before = time.time()
    client.log_gauges(name="gpu/util_pct", value=[50, 75.5], host="node-1", device=[0, 1])
    client.log_gauges(name=["a", "b"], value=np.array([1.0, np.inf]), time=[10.0, 11.0])
    msgs = of_type(client, "gauges")
    assert column(msgs, "name") == ["gpu/util_pct", "gpu/util_pct", "a", "b"]
    assert column(msgs, "value")[:3] == [50.0, 75.5, 1.0]
    assert column(msgs, "value")[3] is None
    assert column(msgs, "host") == ["node-1", "node-1", None, None]
    assert column(msgs, "device") == [0, 1, None, None]
    assert all(t >= before for t in column(msgs, "time")[:2])
    assert client.stats["logged_gauges"] == 4


def test_rows_the_server_would_refuse_are_left_out_and_named(client: Client) -> None:
    now = time.time()
    client.log_events(name=["ok", "bad\u202ename", "ok", "ok", "ok"],
                      start=[now, now, now * 1000, now, now], end=[now + 1, now, now, now - 5,
                                                                   None],
                      status=[None, None, None, None, "fine"])
    client.log_events(name="x", start=[now, now], end=[now])  # lengths differ: a bad call
    with client.span("kept"):
        pass
    assert not client.flush(2)  # something was not stored since the last flush
    [msg] = of_type(client, "events")
    assert msg["name"] == ["kept", "ok"]
    reasons = {e["what"]: e for e in client.not_stored}
    assert reasons["events: name"]["count"] == 1 and "\\u202e" in reasons["events: name"]["why"]
    assert reasons["events: start"]["count"] == 1
    assert reasons["events: end"]["why"].startswith("end ") and "before start" in \
        reasons["events: end"]["why"]
    assert reasons["events: status"]["why"].startswith("status 'fine' is not null")
    assert "end has 1" in reasons["log_events"]["why"]
    assert client.stats["invalid_values"] == 5
    with client.span("later"):
        pass
    assert client.sync(5)


def test_numpy_scalars_are_plain_values_and_odd_labels_are_left_out(client: Client) -> None:
    with client.span(np.str_("forward"), server=np.int64(3), step=np.int32(2),
                     sample_id=np.uint8(7)):
        pass
    with client.span("backward", sample_id=["unhashable"]):  # type: ignore[arg-type]
        pass
    with client.span("backward", group_id=2**70):
        pass
    with client.span("backward", server=1.5):  # type: ignore[arg-type]
        pass
    assert not client.flush(2)
    [msg] = of_type(client, "events")
    assert column([msg], "name") == ["forward"]
    assert column([msg], "server") == [3] and column([msg], "step") == [2]
    assert column([msg], "sample_id") == [7]
    assert {e["what"]: e["count"] for e in client.not_stored} == {
        "events: sample_id": 1, "events: group_id": 1, "events: server": 1}


def test_copy_columns_protects_event_columns_changed_in_place(tmp_path: Path) -> None:
    c = offline(tmp_path, copy_columns=True)
    try:
        start, ranks = [100.0, 101.0], np.array([0, 1])
        c.log_events(name="forward", start=start, rank=ranks)
        start[0], ranks[:] = -1.0, 7  # before the recorder read them
        [msg] = of_type(c, "events")
        assert msg["start"] == [100.0, 101.0] and column([msg], "rank") == [0, 1]
    finally:
        c.close(timeout=0.1)


def test_spans_after_close_are_counted_not_stored(tmp_path: Path) -> None:
    c = offline(tmp_path)
    c.close(timeout=0.1)
    with c.span("late"):
        pass
    c.log_gauges(name="x", value=1.0)
    assert c.stats["dropped_closed"] == 2
    assert [e["reason"] for e in c.not_stored] == ["closed", "closed"]


def test_a_json_client_sends_integer_columns_with_nulls_as_lists(tmp_path: Path) -> None:
    c = offline(tmp_path, encoding="json")
    try:
        with c.span("forward", step=1):
            pass
        with c.span("forward"):
            pass
        [msg] = of_type(c, "events")
        assert msg["step"] == [1, None] and msg["name"] == "forward"
    finally:
        c.close(timeout=0.1)


def test_concurrent_callers_lose_and_repeat_nothing(tmp_path: Path) -> None:
    c = offline(tmp_path)
    threads, per = 4, 3000
    try:
        def work(t: int) -> None:
            for i in range(per):
                with c.span("generation", server=t, sample_id=t * per + i):
                    pass
        workers = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        msgs = of_type(c, "events")
        ids = column(msgs, "sample_id")
        assert sorted(ids) == list(range(threads * per))
        assert max(len(m["start"]) for m in msgs) <= 4096
    finally:
        c.close(timeout=0.1)


def test_a_message_refused_as_too_large_is_split_and_every_span_arrives(
        tmp_path: Path) -> None:
    def reply(msg: dict[str, Any], n: int) -> str | int:
        return 4413 if msg["type"] == "events" and "." not in msg["id"] else "ack"

    with ScriptedServer(reply) as server:
        c = connect(server.url, "tok", "r", spool_dir=tmp_path, backoff_initial=0.05)
        for i in range(300):
            with c.span("generation", sample_id=i):
                pass
        assert c.flush(30), c.not_stored
        stats = c.stats
        assert c.close(5)
    assert stats["splits"] == 1
    halves = [p.validate_message(p.decode_frame(msgpack.packb(m), binary=True))
              for m in server.received if "." in m["id"]]
    assert [h.n for h in halves] == [150, 150]
    assert [h.sample_id.at(i) for h in halves for i in range(h.n)
            if isinstance(h, p.Events)] == list(range(300))


# ---------------------------------------------------------------- the recorder


def test_the_recorder_flushes_at_max_rows_without_waiting_for_age() -> None:
    sent = Collected()
    rec = TimelineRecorder(sent, sent, lists_for_nulls=False, max_rows=100, max_age=3600)
    try:
        for i in range(250):
            with rec_span(rec, i):
                pass
        assert sent.arrived.wait(30)  # woken by size: the age is an hour
        deadline = time.monotonic() + 30
        while sum(len(m["start"]) for m in sent.messages) < 200 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert all(len(m["start"]) <= 100 for m in sent.messages)
        rec.drain()
        assert sum(len(m["start"]) for m in sent.messages) == 250
    finally:
        rec.close()


def test_the_recorder_flushes_by_age() -> None:
    sent = Collected()
    rec = TimelineRecorder(sent, sent, lists_for_nulls=False, max_rows=4096, max_age=0.05)
    try:
        with rec_span(rec, 0):
            pass
        assert sent.arrived.wait(30)  # no drain, no size: the age flush sent it
        assert sent.messages[0]["name"] == "forward"
    finally:
        rec.close()


def test_a_large_call_is_cut_into_messages_of_max_rows() -> None:
    sent = Collected()
    rec = TimelineRecorder(sent, sent, lists_for_nulls=False, max_rows=4096, max_age=3600)
    try:
        n = 10_000
        rec.event_calls.append(("forward", np.arange(n) + 1e9, None, None, None,
                                np.arange(n) % 8, None, None, None, None, None, None))
        rec.drain()
        assert [len(m["start"]) for m in sent.messages] == [4096, 4096, 1808]
        assert np.concatenate([m["rank"] for m in sent.messages]).tolist() \
            == (np.arange(n) % 8).tolist()
    finally:
        rec.close()


def rec_span(rec: TimelineRecorder, i: int) -> Span:
    return Span(rec.spans, "forward", "trainer", i, 0, None, None, None, None, None, None)


# ---------------------------------------------------------------- Timeline(client=...)


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_timeline_regions_become_events_of_their_step(client: Client) -> None:
    clock = FakeClock()
    tl = Timeline(clock=clock, client=client, rank=3, step=10)
    for _ in range(2):
        with tl.region("waiting_for_data"):
            clock.now += 1.0
        for _ in range(2):
            with tl.microbatch(), tl.region("forward"):
                clock.now += 0.5
        with tl.region("optimizer_step"):
            clock.now += 0.25
        metrics = tl.step_metrics()
    assert metrics["timing_forward_total"] == 1.0
    [msg] = of_type(client, "events")
    assert column([msg], "name") == ["forward", "forward", "optimizer_step"] * 2
    assert column([msg], "step") == [10, 10, 10, 11, 11, 11]
    assert column([msg], "rank") == [3] * 6 and column([msg], "source") == ["trainer"] * 6
    starts, ends = column([msg], "start"), column([msg], "end")
    durations = [round(e - s, 6) for s, e in zip(starts, ends, strict=True)]
    assert durations == [0.5, 0.5, 0.25] * 2
    assert round(starts[3] - starts[0], 6) == 2.25  # one step apart on the unix clock
    assert abs(starts[0] - time.time()) < 3600  # moved to unix seconds


def test_explicit_step_numbers_and_no_events_without_regions(client: Client) -> None:
    clock = FakeClock()
    tl = Timeline(clock=clock, client=client)
    tl.step_metrics(step=5)  # no region: nothing to log
    with tl.region("forward"):
        clock.now += 1.0
    tl.step_metrics()  # the next step: 6
    [msg] = of_type(client, "events")
    assert column([msg], "step") == [6] and column([msg], "rank") == [None]


def _ranks_log_their_regions(rank: int, world: int) -> list[dict[str, Any]]:
    """In each spawned rank: rank 0 starts the run, the others join it; each times two steps
    and returns what its outbox holds."""
    import tempfile

    from devtools.live_server import free_port

    url = f"ws://127.0.0.1:{free_port()}"
    spool = Path(tempfile.mkdtemp())
    c = connect(url, "tok", "dist", spool_dir=spool, spill_after=0, join=rank > 0)
    tl = Timeline(client=c)
    for _ in range(2):
        with tl.region("forward"):
            time.sleep(0.001)
        with tl.region("backward"):
            pass
        tl.step_metrics()
    out = of_type(c, "events")
    c.close(timeout=0.1)
    return out


@pytest.mark.distributed
def test_each_rank_logs_its_regions_with_its_rank() -> None:
    results = run_world(2, _ranks_log_their_regions)
    for rank, msgs in enumerate(results):
        assert column(msgs, "rank") == [rank] * 4
        assert column(msgs, "step") == [0, 0, 1, 1]
        assert column(msgs, "name") == ["forward", "backward"] * 2
