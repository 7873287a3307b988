"""One aggregation owner per deployment: two server processes on PostgreSQL share a backlog of
dirty steps, each step claimed (and aggregated) by exactly one of them."""

from __future__ import annotations

import json
import re
import time
import urllib.request
from typing import Any
from urllib.parse import quote

import pytest

from devtools.live_server import LiveServer, ServerState

pytestmark = pytest.mark.service

STEPS = 6_000  # a dozen passes: both pipelines' sweeps find work
PER_MESSAGE = 500  # the protocol's cap on the steps one samples message spans
AGGREGATED = re.compile(r"run \d+: (\d+) steps aggregated")


def post(server: LiveServer, token: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
    req = urllib.request.Request(server.http + "/api/ingest", data=json.dumps(messages).encode(),
                                 headers={"Authorization": f"Bearer {token}",
                                          "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=300) as resp:
        body = json.load(resp)
    assert not body["errors"], body["errors"]
    return body


def get(server: LiveServer, path: str) -> Any:
    with urllib.request.urlopen(server.http + path, timeout=30) as resp:
        return json.load(resp)


def aggregated_since(server: LiveServer, offset: int) -> int:
    """Steps this server's pipeline aggregated (its debug log) after byte `offset`."""
    text = server.log.read_bytes()[offset:].decode(errors="replace")
    return sum(int(n) for n in AGGREGATED.findall(text))


def test_two_processes_share_a_backlog_and_aggregate_each_step_once(
        service_state: ServerState) -> None:
    service_state.env.update(LOG_LEVEL="DEBUG", TELESCOPE_PIPELINE_SWEEP_MS="100")
    a, b = LiveServer(service_state).start(), LiveServer(service_state).start()
    try:
        token = service_state.token("owners")
        for lo in range(0, STEPS, PER_MESSAGE):
            steps = [s for s in range(lo, lo + PER_MESSAGE) for _ in range(4)]
            post(a, token, [{"v": 1, "id": f"s{lo}", "type": "samples", "run": "r",
                             "step": steps, "env": "e", "sample_id": list(range(len(steps))),
                             "group_id": steps,
                             "reward": [float(i % 3) for i in range(len(steps))]}])
        post(a, token, [{"v": 1, "id": "b", "type": "barrier", "run": "r"}])
        run_id = next(r["id"] for r in get(a, "/api/runs")["runs"] if r["name"] == "r")
        assert get(a, f"/api/runs/{run_id}")["pending_steps"] == 0
        marks = {s: s.log.stat().st_size for s in (a, b)}
        envs = service_state.tmp / "envs.yaml"
        envs.write_text("environments:\n  - {name: e, reward_min: 0, reward_max: 4}\n")
        # Another process changes the declarations: every step is dirty again, and neither
        # server is told; both pipelines' sweeps find the backlog.
        service_state.manage("declare_ranges", "--project", "owners", "--run", "r", str(envs))
        deadline = time.monotonic() + 120
        while get(a, f"/api/runs/{run_id}")["pending_steps"]:
            assert time.monotonic() < deadline, "the backlog was not worked off in 120 s"
            time.sleep(0.1)
        time.sleep(0.5)  # the last pass's log line is written before its commit: settle
        done = {s: aggregated_since(s, marks[s]) for s in (a, b)}
        # Against reward_max 4 no group (rewards 0–2) is all at max any more: every step redone.
        sid = "groups|groups|all_max|"
        got = get(b, f"/api/runs/{run_id}/series?ids={quote(sid, safe='')}&max_points=20000"
                  )["series"][sid]
        assert len(got["step"]) == STEPS and set(got["value"]) == {0.0}
    finally:
        a.stop()
        b.stop()
    assert sum(done.values()) == STEPS, done  # no step aggregated twice, none left out
    assert all(done.values()), done  # both took part
