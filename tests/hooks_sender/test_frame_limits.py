"""Limits and lifetime of a real server process: a 20 MiB frame (above
TELESCOPE_MAX_MESSAGE_BYTES, below daphne's cap) is closed with 4413, not dropped; a server
killed with SIGKILL leaves no child process behind; ingest goes on while Redis is down."""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect as ws_connect

from devtools.live_server import LiveServer, ServerState, free_port
from trainer_hooks import connect


def test_a_20_mib_frame_gets_close_4413(dashboard_server: LiveServer,
                                        live_state: ServerState) -> None:
    token = live_state.token("proj")
    with ws_connect(dashboard_server.ws + "/ws/ingest/", max_size=None,
                    additional_headers={"Authorization": f"Bearer {token}"}) as ws:
        ws.send(b"\x00" * (20 << 20))
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(60)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 4413


def children(pid: int) -> set[int]:
    """Processes whose parent is `pid` (from /proc)."""
    out = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.add(int(stat.parent.name))
    return out


@pytest.mark.skipif(not Path("/proc").exists(), reason="needs /proc (Linux)")
def test_a_killed_server_leaves_no_orphan_processes(live_state: ServerState) -> None:
    server = LiveServer(live_state).start()
    token = live_state.token("proj")
    for step in range(3):  # each request aggregates; the worker outlives the request thread
        body = json.dumps({"v": 1, "id": f"s{step}", "type": "samples", "run": "r",
                           "step": step, "sample_id": [1, 2], "group_id": [0, 0],
                           "reward": [0.0, 1.0]})
        req = urllib.request.Request(server.http + "/api/ingest", data=body.encode(),
                                     headers={"Authorization": f"Bearer {token}",
                                              "Content-Type": "application/json"})
        urllib.request.urlopen(req, timeout=60).read()
        time.sleep(0.5)
    assert server.proc is not None
    kids = children(server.proc.pid)
    assert kids, "the aggregation worker should be running"
    server.kill()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(Path(f"/proc/{k}").exists() for k in kids):
        time.sleep(0.1)
    alive = [k for k in kids if Path(f"/proc/{k}").exists()
             and Path(f"/proc/{k}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"]
    assert not alive, f"orphans: {alive}"


def test_ingest_works_while_the_redis_layer_is_down(tmp_path: Path) -> None:
    state = ServerState(tmp_path, os.environ.get("DATABASE_URL"),
                        f"redis://127.0.0.1:{free_port()}/0")  # nothing listens there
    server = LiveServer(state).start()
    try:
        token = state.token("proj")
        c = connect(server.ws, token, "no-redis", spool_dir=tmp_path / "spool")
        for step in range(20):
            c.log_step(step, {"loss": float(step)})
        t0 = time.monotonic()
        assert c.close(60), c.not_stored
        print(f"20 steps stored with Redis down in {time.monotonic() - t0:.2f} s")
        try:
            urllib.request.urlopen(server.http + "/healthz", timeout=30)
            raise AssertionError("healthz should report the channel layer")
        except urllib.error.HTTPError as exc:
            assert exc.code == 503
            assert json.load(exc)["channel_layer"].startswith("error")
    finally:
        server.stop()
        state.drop()
