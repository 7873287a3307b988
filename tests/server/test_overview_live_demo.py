"""The live demo `make run` streams beside the server (telescope_ui/live_demo.py), against a real
server process: it streams a GRPO-like run through trainer_hooks until total_steps and ends it
`finished`; it stops when the process it watches (the server) ends; a restart resumes the run."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from devtools.live_server import ROOT, LiveServer


def runs(server: LiveServer) -> list[dict[str, Any]]:
    with urllib.request.urlopen(server.http + "/api/runs?project=demo", timeout=30) as res:
        return json.loads(res.read())["runs"]  # type: ignore[no-any-return]


def live_runs(server: LiveServer) -> list[dict[str, Any]]:
    return [r for r in runs(server) if r["name"].startswith("grpo-live")]


def streamer(server: LiveServer, watch_pid: int, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "telescope_ui.live_demo", "--url", server.http,
         "--watch-pid", str(watch_pid), *args],
        env=server.state.env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


@pytest.fixture
def watched() -> Iterator[subprocess.Popen[bytes]]:
    """A stand-in for the server's process: the demo stops when it ends."""
    proc = subprocess.Popen(["sleep", "600"])
    yield proc
    proc.kill()
    proc.wait()


def wait_until(check: Any, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (found := check()):
        assert time.monotonic() < deadline, "the live demo made no progress"
        time.sleep(0.2)
    return found


def test_it_streams_a_run_to_its_total_and_ends_it_finished(
        dashboard_server: LiveServer, watched: subprocess.Popen[bytes]) -> None:
    demo = streamer(dashboard_server, watched.pid, "--total-steps", "6",
                    "--steps-per-second", "20", "--cycles", "1")
    out, _ = demo.communicate(timeout=120)
    assert demo.returncode == 0, out.decode()
    [run] = live_runs(dashboard_server)
    assert (run["name"], run["status"], run["last_step"], run["total_steps"]) == (
        "grpo-live", "finished", 5, 6)
    with urllib.request.urlopen(f"{dashboard_server.http}/api/runs/{run['id']}/catalog",
                                timeout=30) as res:
        keys = {(e["kind"], e["key"]) for e in json.loads(res.read())["series"]}
    assert {("step", "entropy"), ("reward", "reward"), ("groups", "groups")} <= keys


def test_it_stops_with_the_watched_process_and_a_restart_resumes_the_run(
        dashboard_server: LiveServer, watched: subprocess.Popen[bytes]) -> None:
    demo = streamer(dashboard_server, watched.pid, "--total-steps", "100000",
                    "--steps-per-second", "10")
    try:
        first = wait_until(lambda: [r for r in live_runs(dashboard_server)
                                    if (r["last_step"] or 0) >= 2])[0]
        assert first["status"] == "running" and first["eta_seconds"] is not None
        watched.kill()
        watched.wait()
        out, _ = demo.communicate(timeout=60)  # it ends on its own
        assert demo.returncode == 0
        assert b"the server stopped" in out
    finally:
        if demo.poll() is None:
            demo.kill()
    stopped_at = live_runs(dashboard_server)[0]["last_step"]
    again = subprocess.Popen(["sleep", "600"])
    demo = streamer(dashboard_server, again.pid, "--total-steps", "100000",
                    "--steps-per-second", "10")
    try:
        wait_until(lambda: (live_runs(dashboard_server)[0]["last_step"] or 0) > stopped_at + 2)
        [run] = live_runs(dashboard_server)  # the same run, continued
        assert run["id"] == first["id"] and run["status"] == "running"
    finally:
        again.kill()
        again.wait()
        demo.communicate(timeout=60)
