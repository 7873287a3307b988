"""Limits and lifetime of a real server process: a 20 MiB frame (above
TELESCOPE_MAX_MESSAGE_BYTES, below daphne's cap) is closed with 4413, not dropped; a server
killed with SIGKILL leaves no child process behind; a pipeline worker killed mid-backlog is
replaced and its claims given back; ingest goes on while Redis is down."""

from __future__ import annotations

import json
import os
import signal
import time
import urllib.error
import urllib.parse
import urllib.request
from contextlib import closing
from pathlib import Path

import numpy as np
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


def pipeline_worker(server_pid: int) -> int:
    """The server's pipeline worker process (a multiprocessing spawn child that is not the
    resource tracker)."""
    for kid in children(server_pid):
        cmd = Path(f"/proc/{kid}/cmdline").read_bytes().replace(b"\0", b" ")
        if b"spawn_main" in cmd and b"resource_tracker" not in cmd:
            return kid
    raise AssertionError(f"no pipeline worker among {children(server_pid)}")


def cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def claimed_steps(state: ServerState) -> int:
    """Steps some pipeline holds a claim on, read straight from the server's database."""
    sql = "SELECT count(*) FROM ingest_stepstate WHERE claimed_until IS NOT NULL"
    url = state.env.get("DATABASE_URL")
    if url:
        import psycopg
        with psycopg.connect(url) as conn:
            row = conn.execute(sql).fetchone()
    else:
        import sqlite3
        with closing(sqlite3.connect(str(state.tmp / "telescope.sqlite3"), timeout=30)) as db:
            row = db.execute(sql).fetchone()
    assert row is not None
    return int(row[0])


@pytest.mark.skipif(not Path("/proc").exists(), reason="needs /proc (Linux)")
def test_a_pipeline_worker_killed_mid_backlog_is_replaced_and_nothing_waits_for_its_claims(
        dashboard_server: LiveServer, live_state: ServerState) -> None:
    """The worker dies (SIGKILL) while it holds claims on a backlog's steps: a new one takes
    over, the claimed steps are given back at once (not after the claims' 60 s, which the
    close() below does not wait for), and the barrier returns with every step aggregated."""
    assert dashboard_server.proc is not None
    token = live_state.token("proj")
    worker = pipeline_worker(dashboard_server.proc.pid)
    settled = cpu_ticks(worker)
    while True:  # its start (Django set up) is over: its CPU from now on is aggregation
        time.sleep(0.5)
        if cpu_ticks(worker) == settled:
            break
        settled = cpu_ticks(worker)
    c = connect(dashboard_server.ws, token, "killed-worker", spool_dir=live_state.tmp / "spool")
    rng = np.random.default_rng(0)
    steps, n = 1500, 512
    for step in range(steps):
        c.log_samples(step, sample_id=np.arange(n), group_id=np.arange(n) // 16,
                      reward=rng.random(n), metrics={"m": rng.random(n)})
    deadline = time.monotonic() + 60
    while not claimed_steps(live_state):  # it is on a pass: its claims are committed
        assert time.monotonic() < deadline, "the worker never claimed steps of the backlog"
        time.sleep(0.005)
    os.kill(worker, signal.SIGKILL)
    t0 = time.monotonic()
    assert c.close(45), c.not_stored
    assert time.monotonic() - t0 < 45
    run = next(r for r in json.load(urllib.request.urlopen(dashboard_server.http + "/api/runs"))
               ["runs"] if r["name"] == "killed-worker")
    sid = urllib.parse.quote("reward|reward|mean|", safe="")
    got = json.load(urllib.request.urlopen(
        f"{dashboard_server.http}/api/runs/{run['id']}/series?ids={sid}&max_points=20000"))
    assert len(got["series"]["reward|reward|mean|"]["step"]) == steps
    assert pipeline_worker(dashboard_server.proc.pid) != worker


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
