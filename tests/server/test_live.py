"""Browser live updates: subscribe after a snapshot, sequence-numbered deltas, resync."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator

from ingest.core.series_ids import series_id
from ingest.models import Run
from ingest.reads import catalog as reads
from telescope_ui.asgi import application
from tests.server.conftest import Page, Trainer, step_msg

pytestmark = pytest.mark.django_db(transaction=True)

@database_sync_to_async
def snapshot(run_name: str, sids: list[str]) -> tuple[int, dict[str, dict[int, float]]]:
    run = Run.objects.get(name=run_name)
    got = reads.series(run.pk, sids, 20_000, None, None)
    return run.pk, {sid: dict(zip(s["step"], s["value"], strict=True))
                    for sid, s in got["series"].items()} | {"__seq__": got["seq"]}


async def test_a_page_from_another_origin_is_refused(transactional_db: None) -> None:
    headers = [(b"origin", b"http://evil.example"), (b"host", b"127.0.0.1:8000")]
    comm = WebsocketCommunicator(application, "/ws/live/", headers=headers)
    connected, _ = await comm.connect()
    assert not connected


async def test_snapshot_plus_deltas_equals_a_fresh_snapshot(trainer: Trainer, page: Page) -> None:
    await trainer.send(step_msg(0, {"loss": 1.0}))
    sids = [series_id("step", "loss"), series_id("step", "acc")]
    run_id, state = await snapshot("r", sids)
    seq = state.pop("__seq__")
    await page.send(type="subscribe", run=run_id, after_seq=seq)
    first = await page.recv_delta()  # the (empty) replay since the snapshot
    assert (first["from_seq"], first["seq"], first["points"]) == (seq, seq, {})
    for step in range(1, 8):
        await trainer.send(step_msg(step, {"loss": 1.0 / (step + 1), "acc": step / 10}))
    await trainer.send(step_msg(3, {"loss": 9.0}, mid="rewrite-3"))
    last, new_ids = seq, set()
    while last < seq + 8:
        delta = await page.recv_delta()
        assert delta["from_seq"] == last  # contiguous: nothing missed
        last = delta["seq"]
        new_ids |= {s["id"] for s in delta["series"]}
        for sid, pts in delta["points"].items():
            for step, value in zip(pts["step"], pts["value"], strict=True):
                state.setdefault(sid, {})[step] = value
    assert new_ids == {series_id("step", "acc")}
    _, fresh = await snapshot("r", sids)
    fresh.pop("__seq__")
    assert state == fresh
    assert state[series_id("step", "loss")][3] == 9.0


async def test_a_resync_replays_what_was_missed(trainer: Trainer, page: Page) -> None:
    await trainer.send(step_msg(0, {"loss": 1.0}))
    run_id, state = await snapshot("r", [])
    seq = state["__seq__"]
    for step in range(1, 4):
        await trainer.send(step_msg(step, {"loss": float(step)}))
    await page.send(type="subscribe", run=run_id, after_seq=seq)
    delta = await page.recv_delta()
    assert (delta["from_seq"], delta["seq"]) == (seq, seq + 3)
    assert delta["points"][series_id("step", "loss")]["step"] == [1, 2, 3]
    await page.send(type="resync", run=run_id, after_seq=seq + 1)
    again = await page.recv_delta()
    assert again["from_seq"] == seq + 1
    assert again["points"][series_id("step", "loss")]["value"] == [2.0, 3.0]


async def test_a_lost_broadcast_is_filled_from_the_database(trainer: Trainer, page: Page) -> None:
    await trainer.send(step_msg(0, {"loss": 1.0}))
    run_id, state = await snapshot("r", [])
    seq = state["__seq__"]
    await page.send(type="subscribe", run=run_id, after_seq=seq)
    await page.recv_delta()
    # Commit one step without broadcasting it (as if the pub/sub message were dropped) ...
    from ingest.write.frames import handle_object
    project = await database_sync_to_async(lambda: Run.objects.get(pk=run_id).project_id)()
    await database_sync_to_async(handle_object)(project, step_msg(1, {"loss": 2.0}))
    # ... then a later commit's broadcast reveals the gap.
    await trainer.send(step_msg(2, {"loss": 3.0}))
    delta = await page.recv_delta()
    assert (delta["from_seq"], delta["seq"]) == (seq, seq + 2)
    assert delta["points"][series_id("step", "loss")]["step"] == [1, 2]


async def test_fast_commits_are_coalesced_into_few_deltas(trainer: Trainer, page: Page,
                                                          settings: Any) -> None:
    settings.TELESCOPE_LIVE_INTERVAL_MS = 300
    await trainer.send(step_msg(0, {"loss": 1.0}))
    run_id, state = await snapshot("r", [])
    seq = state["__seq__"]
    await page.send(type="subscribe", run=run_id, after_seq=seq)
    await page.recv_delta()
    for step in range(1, 31):
        await trainer.send(step_msg(step, {"loss": float(step)}))
    deltas, last, got = 0, seq, {}
    while last < seq + 30:
        delta = await page.recv_delta()
        assert delta["from_seq"] == last
        last, deltas = delta["seq"], deltas + 1
        pts = delta["points"].get(series_id("step", "loss"), {"step": [], "value": []})
        got.update(zip(pts["step"], pts["value"], strict=True))
    assert deltas < 30
    assert got == {step: float(step) for step in range(1, 31)}  # merged deltas lose nothing


async def test_unknown_requests_get_an_error(page: Page) -> None:
    await page.send(type="subscribe", run=12345, after_seq=0)
    assert (await page.recv())["type"] == "error"
    await page.comm.send_to(text_data="nonsense")
    assert (await page.recv())["type"] == "error"


async def test_points_that_arrive_during_a_flush_are_sent_after_it(
        trainer: Trainer, page: Page, monkeypatch: pytest.MonkeyPatch) -> None:
    from telescope_ui.live import LiveConsumer

    original = LiveConsumer._flush_run
    calls = 0

    async def slow_first_flush(self: LiveConsumer, run_id: int, events: list) -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            await asyncio.sleep(0.5)  # a slow send: the next commit lands meanwhile
        await original(self, run_id, events)

    monkeypatch.setattr(LiveConsumer, "_flush_run", slow_first_flush)
    await trainer.send(step_msg(0, {"loss": 1.0}))
    run_id, state = await snapshot("r", [])
    seq = state["__seq__"]
    await page.send(type="subscribe", run=run_id, after_seq=seq)
    await page.recv_delta()
    await trainer.send(step_msg(1, {"loss": 2.0}))
    await asyncio.sleep(0.1)
    await trainer.send(step_msg(2, {"loss": 3.0}))  # while the first flush is still sending
    last = seq
    while last < seq + 2:
        delta = await page.recv_delta()
        assert delta["from_seq"] == last
        last = delta["seq"]


@pytest.mark.parametrize(("origin", "allowed"), [
    (b"http://127.0.0.1:8000", True),
    (b"http://127.0.0.1:9999", False),  # another server of the same host
    (b"http://localhost:8000", False),  # another host name: another origin
    (b"https://127.0.0.1:8000", False),
    (b"null", False),
])
async def test_a_page_must_come_from_the_dashboards_own_origin_port_included(
        transactional_db: None, origin: bytes, allowed: bool) -> None:
    headers = [(b"origin", origin), (b"host", b"127.0.0.1:8000")]
    comm = WebsocketCommunicator(application, "/ws/live/", headers=headers)
    connected, _ = await comm.connect()
    assert connected is allowed
    await comm.disconnect()


def test_same_origin_takes_default_ports_and_trusted_origins(settings: Any) -> None:
    from telescope_ui.origin import same_origin

    assert same_origin("http://dash.example", "dash.example:80")
    assert same_origin("https://dash.example", "dash.example", "https")
    assert not same_origin("https://dash.example", "dash.example")  # served over plain ws
    assert not same_origin("http://dash.example:8080", "dash.example")
    settings.CSRF_TRUSTED_ORIGINS = ["https://dash.example"]
    assert same_origin("https://dash.example", "10.0.0.5:8000")  # behind a proxy


async def test_a_reader_from_afar_without_an_account_gets_close_4403_as_documented(
        transactional_db: None) -> None:
    comm = WebsocketCommunicator(application, "/ws/live/", headers=[
        (b"origin", b"http://127.0.0.1:8000"), (b"host", b"127.0.0.1:8000")])
    comm.scope["client"] = ["10.1.2.3", 5000]
    connected, _ = await comm.connect()
    assert connected  # (not an HTTP 403: the page is told why)
    assert (await comm.receive_output(5)) == {"type": "websocket.close", "code": 4403}
    await comm.disconnect()
