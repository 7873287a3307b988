"""The storage fails under a streaming trainer, then recovers: nothing is lost, nothing is
counted twice, and `close()` is True once the fault ends (docs/protocol.md "Replies").

- PostgreSQL cut for 5 s: a TCP proxy in front of the machine's PostgreSQL closes every
  connection through it and refuses new ones, then listens again.
- A full disk under the embedded SQLite database: its data directory on a small tmpfs filled to
  the last byte, then freed. Meanwhile `/healthz` says 503 and why.

Before, ingest closed with 1011 on such a failure, which the server's WebSocket layer does not
send: the socket stayed open and silent and the trainer waited forever."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devtools.live_server import LiveServer, ServerState
from devtools.tcp_proxy import TcpProxy
from tests.conftest import CI, PG_URL, require_services
from trainer_hooks import connect

STEPS, PER_STEP = 160, 64


def get(server: LiveServer, path: str) -> Any:
    with urllib.request.urlopen(server.http + path, timeout=30) as resp:
        return json.load(resp)


def healthz(server: LiveServer) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(server.http + "/healthz", timeout=30) as resp:
            return resp.status, json.load(resp)
    except urllib.error.HTTPError as exc:
        return exc.code, json.load(exc)


class Trainer:
    """Logs STEPS steps of PER_STEP samples on a thread, a little at a time."""

    def __init__(self, server: LiveServer, spool: Path, run: str) -> None:
        self.client = connect(server.ws, server.state.token(), run, spool_dir=spool,
                              backoff_initial=0.1, backoff_max=1.0, flush_interval=0.1)
        self.logged = threading.Event()
        self.half = threading.Event()
        self.thread = threading.Thread(target=self.log, daemon=True)
        self.thread.start()

    def log(self) -> None:
        for step in range(STEPS):
            ids = [f"s{step}-{i}" for i in range(PER_STEP)]
            self.client.log_step(step, {"loss": 1.0 / (step + 1)})
            self.client.log_samples(step, sample_id=ids, group_id=[i // 8 for i in range(PER_STEP)],
                                    reward=[float((step + i) % 3) for i in range(PER_STEP)])
            if step == STEPS // 2:
                self.half.set()
            time.sleep(0.01)
        self.logged.set()


def assert_all_stored(server: LiveServer, run: str) -> None:
    [info] = [r for r in get(server, "/api/runs")["runs"] if r["name"] == run]
    assert [r["name"] for r in get(server, "/api/runs")["runs"]] == [run]  # no second run
    catalog = get(server, f"/api/runs/{info['id']}/catalog")["series"]
    [count] = [s["id"] for s in catalog
               if s["kind"] == "reward" and s["stat"] == "count" and s["env"] is None]
    [loss] = [s["id"] for s in catalog if s["kind"] == "step" and s["key"] == "loss"]
    q = urllib.parse.urlencode({"ids": f"{count},{loss}", "max_points": 20000})
    got = get(server, f"/api/runs/{info['id']}/series?{q}")["series"]
    assert got[count]["step"] == list(range(STEPS))
    assert got[count]["value"] == [PER_STEP] * STEPS  # every sample once: none lost, none twice
    assert got[loss]["value"] == [1.0 / (s + 1) for s in range(STEPS)]


# ---------------------------------------------------------------- PostgreSQL cut


@pytest.fixture
def proxied_pg(tmp_path: Path) -> Iterator[tuple[ServerState, TcpProxy]]:
    require_services()
    port = urllib.parse.urlsplit(PG_URL).port or 5432
    proxy = TcpProxy(port).start()
    url = urllib.parse.urlunsplit(urllib.parse.urlsplit(PG_URL)._replace(
        netloc=f"postgres@127.0.0.1:{proxy.port}"))
    state = ServerState(tmp_path, url, os.environ.get("REDIS_URL"))
    yield state, proxy
    proxy.restore()
    state.drop()
    proxy.stop()


def test_a_postgresql_cut_of_5_s_loses_nothing_and_close_is_true_after_it(
        proxied_pg: tuple[ServerState, TcpProxy], tmp_path: Path) -> None:
    state, proxy = proxied_pg
    server = LiveServer(state).start()
    try:
        trainer = Trainer(server, tmp_path / "spool", "pg-cut")
        assert trainer.half.wait(60)
        proxy.cut()
        time.sleep(5)
        proxy.restore()
        assert trainer.logged.wait(120)
        assert trainer.client.close(timeout=120, status="finished"), trainer.client.stats
        assert trainer.client.stats["reconnects"] >= 1  # the cut did reach the trainer
        assert_all_stored(server, "pg-cut")
        assert healthz(server)[0] == 200
    finally:
        server.stop()


# ---------------------------------------------------------------- disk full


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "disk"
    mount.mkdir()
    out = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=48m", "tmpfs", str(mount)],
                         capture_output=True, text=True)
    if out.returncode:
        message = f"cannot mount a tmpfs (needs root): {out.stderr.strip()}"
        if CI:
            pytest.fail(message + " (CI=true: this test must run)")
        pytest.skip(message)
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(path: Path) -> None:
    """Write zeros into `path` until the disk under it is full (unbuffered: every failed write
    is seen here, none at close)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        for size in (1 << 20, 4096, 1):
            while True:
                try:
                    os.write(fd, b"\0" * size)
                except OSError:
                    break
    finally:
        os.close(fd)


def test_a_full_disk_fails_healthz_and_once_freed_everything_is_stored(
        small_disk: Path, tmp_path: Path) -> None:
    state = ServerState(small_disk)  # the embedded default: SQLite in the data directory
    server = LiveServer(state)
    server.log = tmp_path / "server.log"  # (not on the full disk)
    server.start()
    filler = small_disk / "filler"
    try:
        trainer = Trainer(server, tmp_path / "spool", "disk-full")
        assert trainer.half.wait(60)
        fill(filler)
        deadline = time.monotonic() + 60
        status, body = healthz(server)
        while status == 200 and time.monotonic() < deadline:
            time.sleep(0.2)
            status, body = healthz(server)
        assert status == 503 and "full" in body["database"], body
        time.sleep(2)
        filler.unlink()
        assert trainer.logged.wait(120)
        assert trainer.client.close(timeout=120, status="finished"), trainer.client.stats
        assert_all_stored(server, "disk-full")
        status, body = healthz(server)
        assert status == 200, body
    finally:
        server.stop()
        filler.unlink(missing_ok=True)
