"""Redis killed under a live page (REDIS_URL set, Redis down): ingest goes on, the
page keeps receiving what is committed (read from the database while the channel layer is out)
and again once Redis is back, and the server log says so in a line, not a traceback a second.

A private redis-server (devtools.private_redis), never the machine's own; the pass's database."""

from __future__ import annotations

import json
import os
import shutil
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from websockets.sync.client import ClientConnection
from websockets.sync.client import connect as ws_connect

from devtools.live_server import LiveServer, ServerState
from devtools.private_redis import RedisProcess
from tests.conftest import CI

SID = "step|x||"


@pytest.fixture
def redis(tmp_path: Path) -> Any:
    if shutil.which("redis-server") is None:
        if CI:
            pytest.fail("redis-server not found (CI=true: this test must run)")
        pytest.skip("redis-server not found")
    proc = RedisProcess(tmp_path)
    proc.start()
    yield proc
    proc.kill()


def post_steps(server: LiveServer, token: str, steps: range) -> None:
    body = [{"v": 1, "id": f"s{s}", "type": "step", "run": "r", "step": s,
             "metrics": {"x": float(s)}} for s in steps]
    req = urllib.request.Request(server.http + "/api/ingest", data=json.dumps(body).encode(),
                                 headers={"Authorization": f"Bearer {token}",
                                          "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        assert len(json.load(resp)["acks"]) == len(body)


def first_run(server: LiveServer, token: str) -> int:
    """Post step 0 of the run `r` and return the run's id."""
    post_steps(server, token, range(1))
    with urllib.request.urlopen(server.http + "/api/runs") as resp:
        return int(json.load(resp)["runs"][0]["id"])


def steps_seen(page: ClientConnection, want: set[int], timeout: float) -> set[int]:
    """Read deltas until every step of `want` arrived (or the time is up): the steps seen."""
    seen: set[int] = set()
    deadline = time.monotonic() + timeout
    while not want <= seen and time.monotonic() < deadline:
        try:
            msg = json.loads(page.recv(max(0.1, deadline - time.monotonic())))
        except TimeoutError:
            break
        if msg["type"] == "delta" and SID in msg["points"]:
            seen.update(msg["points"][SID]["step"])
    return seen


def test_a_live_page_keeps_its_updates_while_redis_is_down(tmp_path: Path,
                                                           redis: RedisProcess) -> None:
    state = ServerState(tmp_path, os.environ.get("DATABASE_URL"), redis.url)
    server = LiveServer(state).start()
    try:
        token = state.token("p")
        run_id = first_run(server, token)
        with ws_connect(server.ws + "/ws/live/", origin=server.http) as page:
            page.send(json.dumps({"type": "subscribe", "run": run_id, "after_seq": 0}))
            assert steps_seen(page, {0}, 10) == {0}

            redis.kill()
            post_steps(server, token, range(1, 6))  # acked: ingest does not need Redis
            assert steps_seen(page, set(range(1, 6)), 15) == set(range(1, 6))

            redis.start()  # back on its port: the layer reconnects, the page keeps up
            post_steps(server, token, range(6, 8))
            assert steps_seen(page, {6, 7}, 15) == {6, 7}
    finally:
        server.stop()
        state.drop()
    log = server.log.read_text()
    assert "Traceback" not in log, log[-3000:]
    assert "cannot reach Redis" in log and "could not be published" in log, log[-3000:]


def test_a_page_opened_while_redis_is_down_reads_from_the_database_and_resyncs(
        tmp_path: Path, redis: RedisProcess) -> None:
    state = ServerState(tmp_path, os.environ.get("DATABASE_URL"), redis.url)
    server = LiveServer(state).start()
    try:
        token = state.token("p")
        run_id = first_run(server, token)
        redis.kill()
        with ws_connect(server.ws + "/ws/live/", origin=server.http) as page:  # (was HTTP 500)
            page.send(json.dumps({"type": "subscribe", "run": run_id, "after_seq": 0}))
            assert steps_seen(page, {0}, 10) == {0}
            post_steps(server, token, range(1, 4))
            assert steps_seen(page, {1, 2, 3}, 15) == {1, 2, 3}
            redis.start()  # the page joins its group once the layer is back
            post_steps(server, token, range(4, 6))
            assert steps_seen(page, {4, 5}, 15) == {4, 5}
    finally:
        server.stop()
        state.drop()
    log = server.log.read_text()
    assert "Traceback" not in log, log[-3000:]
