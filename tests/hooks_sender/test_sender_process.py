"""The sender in a helper process (`connect(..., sender="process")`, transport.helper): what
a log call handed over survives the trainer's death, and the helper's death is noticed,
counted and survived. Real processes, real sockets, the scripted WebSocket server."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import msgpack
import numpy as np

from devtools.live_server import free_port
from tests.hooks_sender.test_sender import ScriptedServer
from trainer_hooks.transport.client import Client, connect
from trainer_hooks.wire import arrays
from trainer_hooks.wire import protocol as p

ROOT = Path(__file__).resolve().parents[2]
STEPS = 300

TRAINER = """
import sys
sys.path.insert(0, {root!r})
from trainer_hooks import connect
import numpy as np
c = connect({url!r}, "tok", "killed", spool_dir={spool!r}, spill_after=60, sender={mode!r})
for step in range({steps}):
    c.log_step(step, {{"loss": 1.0 / (step + 1)}})
    c.log_samples(step, sample_id=np.arange(8) + 8 * step, group_id=np.arange(8) // 4,
                  reward=np.full(8, 0.5), env="countdown")
print("logged", c.helper_pid, flush=True)
import time
time.sleep(3600)
"""


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def wait_for(check: object, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return False


def test_a_trainer_killed_right_after_logging_loses_nothing_it_handed_over(
        tmp_path: Path) -> None:
    spool = str(tmp_path / "spool")
    url = f"ws://127.0.0.1:{free_port()}"  # nobody listens while the trainer lives
    code = TRAINER.format(root=str(ROOT), url=url, spool=spool, steps=STEPS, mode="process")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    with proc.stdout:
        line = proc.stdout.readline().split()
        os.kill(proc.pid, signal.SIGKILL)  # at once: log_* returned, nothing was synced
        proc.wait()
    assert line[0] == "logged", line
    if line[1] != "None":  # (the thread sender has no process to wait for)
        helper = int(line[1])
        assert wait_for(lambda: gone(helper)), "the orphaned sender process did not finish"
    # a resumed client replays the outbox the helper left, to the server it was written for
    port = int(url.rsplit(":", 1)[1])
    with PortServer(port) as server:
        c = connect(url, "tok", "killed", spool_dir=spool, resume=True)
        assert c.flush(60), c.not_stored
        stats = c.stats
        assert c.close(30)
    assert stats["replayed"] > 0 and stats["lost_unspooled"] == 0, stats
    steps = [m["step"] for m in server.received if m["type"] == "step"]
    assert sorted(steps) == list(range(STEPS))
    samples = [s for m in server.received if m["type"] == "samples"
               for s in column(m["step"], len(column(m["reward"], 0)))]
    assert len(samples) == 8 * STEPS and sorted(set(samples)) == list(range(STEPS))


def column(value: Any, n: int) -> list[Any]:
    """A received column as a list (typed arrays decoded; a scalar repeated `n` times)."""
    if isinstance(value, msgpack.ExtType):
        value = arrays.ext_hook(value.code, value.data)
    if isinstance(value, np.ndarray):
        return list(value.tolist())
    return value if isinstance(value, list) else [value] * n


class PortServer(ScriptedServer):
    """The scripted server on a given port (an outbox is replayed to its own URL only)."""

    def __init__(self, port: int) -> None:
        super().__init__(lambda m, n: "ack")
        self.want = port

    async def main(self) -> None:
        import asyncio

        from websockets.asyncio.server import serve

        self.stop = asyncio.get_running_loop().create_future()
        self.loop = asyncio.get_running_loop()
        async with serve(self.handler, "127.0.0.1", self.want, compression=None):
            self.port = self.want
            self.ready.set()
            await self.stop


def queued_unsealed(c: Client, n: int) -> bool:
    _, queued, sealed = c._engine.writer.counters()  # type: ignore[union-attr]
    return queued - sealed >= n


def test_a_killed_sender_process_is_noticed_counted_and_restarted(tmp_path: Path) -> None:
    with ScriptedServer(lambda m, n: "ack") as server:
        # the sender pumps only when asked (a flush): what is logged waits unsealed
        c = connect(server.url, "tok", "r", spool_dir=tmp_path, sender="process",
                    poll_interval=3600.0)
        assert c.flush(30)
        first = c.helper_pid
        assert first is not None
        for step in range(10):
            c.log_step(step, {"loss": float(step)})
        assert wait_for(lambda: queued_unsealed(c, 10))
        os.kill(first, signal.SIGKILL)
        assert wait_for(lambda: c.helper_pid != first and c.stats["sender_restarts"] == 1)
        for step in range(10, 20):
            c.log_step(step, {"loss": float(step)})
        assert not c.flush(30)  # the 10 unsealed steps are lost, and the flush says so
        stats = c.stats
        assert stats["lost_sender_died"] == 10 and stats["not_stored"] == 10
        assert [e["reason"] for e in c.not_stored] == ["sender process died"]
        for step in range(20, 25):
            c.log_step(step, {"loss": float(step)})
        assert c.flush(30)  # nothing lost since
        assert c.close(10)
    steps = sorted(m["step"] for m in server.received if m["type"] == "step")
    assert steps == list(range(10, 25))


def test_the_process_sender_stores_what_the_thread_sender_stores(tmp_path: Path) -> None:
    sent = {}
    for mode in ("thread", "process"):
        with ScriptedServer(lambda m, n: "ack") as server:
            c = connect(server.url, "tok", "r", spool_dir=tmp_path / mode, sender=mode)
            rng = np.random.default_rng(0)
            for step in range(5):
                c.log_step(step, {"loss": 1.0 / (step + 1), "n": np.float32(2.0)})
                c.log_samples(step, sample_id=[f"s{step}-{i}" for i in range(16)],
                              group_id=np.arange(16) // 4, reward=rng.random(16),
                              env=["a"] * 8 + ["b"] * 8, metrics={"m": list(range(16))},
                              completion=[f"text {i}" for i in range(16)], time=1.7e9)
            assert c.close(10)
        sent[mode] = [{k: v for k, v in m.items() if k not in ("id", "incarnation", "time")}
                      for m in server.received]
    # the helper codes label lists (the thread sender leaves them lists): the same labels
    assert any(isinstance(m.get("env"), dict) for m in sent["process"])
    for m in sent["process"]:
        if isinstance(m.get("env"), dict):
            codes = m["env"]["codes"]
            m["env"] = {**m["env"], "codes": arrays.ext_hook(codes.code, codes.data)}
            assert p.unpack_labels(m)
    assert len(sent["process"]) == len(sent["thread"]) > 0
    for a, b in zip(sent["thread"], sent["process"], strict=True):
        assert a.keys() == b.keys()
        for k in a:
            assert str(a[k]) == str(b[k]), k
