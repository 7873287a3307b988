"""A run's status is true (docs/protocol.md "Run status"), against a real server process: a
trainer process that dies of an uncaught exception, of SIGTERM, or through `sys.exit(3)` leaves
its run `failed`; one that ends normally without `close()`, `finished`; one killed outright
(SIGKILL) is `crashed` once it has not been alive for TELESCOPE_CRASH_SECONDS, and running
again with its next message; a live trainer that sends nothing stays `running`."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devtools.live_server import ROOT, LiveServer, ServerState, running

CRASH_SECONDS = 4

TRAINER = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, {root!r})
    from trainer_hooks import connect
    url, token, run, spool, mode = sys.argv[1:6]
    client = connect(url, token, run, spool_dir=spool, backoff_initial=0.1, backoff_max=0.5)
    for step in range(3):
        client.log_step(step, {{"loss": 1.0 / (step + 1)}})
    assert client.flush(30), client.stats
    print("ready", flush=True)
    if mode == "raise":
        raise RuntimeError("the reward function failed")
    if mode == "exit3":
        sys.exit(3)
    if mode == "wait":
        time.sleep(600)
""")


@pytest.fixture
def server(live_state: ServerState) -> Iterator[LiveServer]:
    live_state.env["TELESCOPE_CRASH_SECONDS"] = str(CRASH_SECONDS)
    with running(live_state) as srv:
        yield srv


def start_trainer(server: LiveServer, tmp: Path, run: str, mode: str) -> subprocess.Popen[str]:
    script = tmp / "trainer.py"
    script.write_text(TRAINER.format(root=str(ROOT)))
    proc = subprocess.Popen(  # (read to the end by each test: communicate)
        [sys.executable, str(script), server.ws, server.state.token(), run, str(tmp / run),
         mode], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.strip() == "ready", (line, proc.stderr.read() if proc.stderr else "")
    return proc


def status(server: LiveServer, run: str) -> dict[str, Any]:
    with urllib.request.urlopen(server.http + "/api/runs", timeout=10) as resp:
        [info] = [r for r in json.load(resp)["runs"] if r["name"] == run]
    return info


def wait_status(server: LiveServer, run: str, want: str, timeout: float = 30.0) -> str:
    deadline = time.monotonic() + timeout
    got = status(server, run)["status"]
    while got != want and time.monotonic() < deadline:
        time.sleep(0.2)
        got = status(server, run)["status"]
    return got


@pytest.mark.parametrize(("mode", "exit_code", "want"), [
    ("raise", 1, "failed"), ("exit3", 3, "failed"), ("normal", 0, "finished")])
def test_a_process_that_ends_without_close_ends_its_run_truly(
        server: LiveServer, tmp_path: Path, mode: str, exit_code: int, want: str) -> None:
    run = f"ends-{mode}"
    proc = start_trainer(server, tmp_path, run, mode)
    started = time.monotonic()
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == exit_code, err  # the exit status is the program's own
    assert time.monotonic() - started < 10  # ... and the exit is not held long
    assert status(server, run)["status"] == want
    if mode == "raise":  # the program's own traceback is still printed
        assert "RuntimeError: the reward function failed" in err


def test_sigterm_ends_the_run_failed_and_the_process_still_dies_of_it(
        server: LiveServer, tmp_path: Path) -> None:
    proc = start_trainer(server, tmp_path, "terminated", "wait")
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGTERM, err
    assert status(server, "terminated")["status"] == "failed"


def test_a_killed_trainer_is_crashed_without_eta_and_running_again_on_its_next_message(
        server: LiveServer, tmp_path: Path) -> None:
    proc = start_trainer(server, tmp_path, "killed", "wait")
    time.sleep(CRASH_SECONDS + 2)  # alive all along: the connection is open, heartbeats
    assert status(server, "killed")["status"] == "running"
    proc.kill()
    proc.communicate(timeout=10)
    assert wait_status(server, "killed", "crashed", timeout=CRASH_SECONDS + 20) == "crashed"
    assert status(server, "killed")["eta_seconds"] is None
    from trainer_hooks import connect

    client = connect(server.ws, server.state.token(), "killed", resume=True,
                     spool_dir=tmp_path / "resume")
    client.log_step(3, {"loss": 0.25})
    assert client.flush(30)
    assert status(server, "killed")["status"] == "running"
    assert client.close(30, status="finished")
    assert status(server, "killed")["status"] == "finished"
