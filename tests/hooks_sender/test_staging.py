"""When the sender's staged outbox writes message bodies to disk (trainer_hooks.transport
.engine.SenderEngine.spill_due): a body the server acknowledges in time never reaches the disk,
a body waiting spill_after seconds does, every body does while the server is away, on sync()
and at close; spill_after=0 and fsync=True write every body before it is sent."""

from __future__ import annotations

import sqlite3
import time
from contextlib import closing
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from devtools.live_server import free_port
from tests.hooks_sender.test_sender import ScriptedServer, fill_disk
from trainer_hooks.transport.client import Client, connect

N = 2048  # samples per log call: ~100 KB of body each


def log_some(c: Client, steps: int) -> None:
    rng = np.random.default_rng(0)
    for step in range(steps):
        c.log_samples(step, sample_id=np.arange(N) + step * N, group_id=np.arange(N) // 8,
                      reward=rng.random(N), metrics={"m": rng.random(N)})


def bodies(c: Client) -> list[int]:
    """Lengths of the message bodies in the outbox file as another process reads it (0: the
    body is staged in memory)."""
    assert c.spool_path is not None
    with closing(sqlite3.connect(f"file:{c.spool_path}?mode=ro", uri=True)) as db:
        return [n for (n,) in db.execute("SELECT length(body) FROM outbox ORDER BY seq")]


def file_bytes(c: Client) -> int:
    assert c.spool_path is not None
    return sum(p.stat().st_size for p in c.spool_path.parent.glob(c.spool_path.name + "*"))


def wait_for(check: Any, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.02)
    return False


def test_acknowledged_bodies_never_reach_the_disk(tmp_path: Path) -> None:
    with ScriptedServer(lambda m, n: "ack") as server:
        c = connect(server.url, "tok", "r", spool_dir=tmp_path)
        log_some(c, 100)  # ~10 MB of bodies
        assert c.flush(30)
        written = file_bytes(c)
        sent = c.stats["bytes_sent"]
        assert c.close(10)
    assert sent > 8 << 20
    assert written < sent / 3, (written, sent)  # rows and sample identities (ids) only


def test_without_staging_every_body_is_written_before_it_is_sent(tmp_path: Path) -> None:
    for options in ({"spill_after": 0}, {"fsync": True}):
        with ScriptedServer(lambda m, n: "ack") as server:
            c = connect(server.url, "tok", "r", spool_dir=tmp_path / str(options), **options)
            log_some(c, 20)
            assert c.flush(30)
            written, sent = file_bytes(c), c.stats["bytes_sent"]
            assert c.close(10)
        assert written > sent, (options, written, sent)


def test_bodies_waiting_for_their_ack_are_spilled_after_spill_after(tmp_path: Path) -> None:
    # The server holds every ack 1.5 s: bodies staged longer than spill_after=0.3 s are
    # written meanwhile; acked afterwards, they are gone from the file.
    with ScriptedServer(lambda m, n: "ack", ack_delay=1.5) as server:
        c = connect(server.url, "tok", "r", spool_dir=tmp_path, spill_after=0.3)
        assert c.spool_path is not None  # (the sender has its outbox: a sender process started)
        log_some(c, 3)
        assert wait_for(lambda: len(b := bodies(c)) >= 3 and all(b), 1.2)  # (run.start too)
        assert c.stats["acked"] == 0
        assert c.flush(30)
        assert bodies(c) == []
        assert c.close(10)


def test_everything_is_spilled_while_the_server_is_away_and_on_sync(tmp_path: Path) -> None:
    url = f"ws://127.0.0.1:{free_port()}"  # nobody listens
    c = connect(url, "tok", "r", spool_dir=tmp_path / "away", backoff_max=0.2, spill_after=60)
    log_some(c, 2)
    assert wait_for(lambda: len(b := bodies(c)) >= 2 and all(b), 5)  # ~0.5 s away
    c.close(0.1)
    # Connected, acks held back: sync() writes the staged bodies before it returns.
    with ScriptedServer(lambda m, n: "ack", ack_delay=5) as server:
        c = connect(server.url, "tok", "r2", spool_dir=tmp_path / "sync", spill_after=60)
        log_some(c, 2)
        assert c.sync(10)
        assert len(b := bodies(c)) >= 2 and all(b)  # run.start and the samples
        c.close(0.1)  # (not acknowledged: the file keeps them for a later client)
        assert all(bodies(c))


def test_a_client_stopped_before_its_acks_leaves_every_body_for_the_next(tmp_path: Path
                                                                          ) -> None:
    with ScriptedServer(lambda m, n: "ack", ack_delay=30) as server:
        c = connect(server.url, "tok", "r", spool_dir=tmp_path, spill_after=60)
        log_some(c, 3)
        assert wait_for(lambda: c.stats["sent"] >= 3)  # run.start and the samples
        assert not c.close(0.5)
        left = bodies(c)
        assert len(left) >= 3 and all(left)
        first = [m["id"] for m in server.received]
        server.ack_delay = 0.0  # (the same server: an outbox belongs to one server URL)
        again = connect(server.url, "tok", "r", spool_dir=tmp_path, resume=True)
        assert again.flush(30)
        stats = again.stats
        assert again.close(10)
    assert stats["replayed"] == len(left) and stats["lost_unspooled"] == 0
    assert len(first) == 2 and [m["id"] for m in server.received] == first + first  # resent


@pytest.mark.parametrize("sender", ["thread", "process"])
def test_a_spill_that_fails_carries_on_in_memory(tmp_path: Path, sender: str) -> None:
    """A full disk when staged bodies are written (here on sync()): the outbox goes on in
    memory, as when a write fails, sync() returns False, and every message still reaches the
    server."""
    with ScriptedServer(lambda m, n: "ack", ack_delay=0.5) as server:
        c = connect(server.url, "tok", "r", spool_dir=tmp_path, spill_after=60, sender=sender)
        assert c.flush(10)  # run.start stored: the outbox is idle
        log_some(c, 1)  # its row fits (or not: a failed append goes to memory too)
        assert wait_for(lambda: c.stats["sent"] >= 2)
        fill_disk(c, 2)
        # ~100 KB of body cannot be written: carries on in memory, and the sync says it is
        # not on disk (a checkpoint written now could outlive those samples)
        assert not c.sync(10)
        assert c.flush(10)  # ... but they reach the server
        stats = c.stats
        assert c.close(5)
    assert stats["spool_errors"] == 1 and c.spool_path is None
    assert [m["type"] for m in server.received] == ["samples"]
