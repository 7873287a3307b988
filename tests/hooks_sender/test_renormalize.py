"""Declared ranges re-normalize a run in the server's own background, with no page or trainer
connected: after `manage.py declare_ranges` (another process) and after a `ranges` message
whose socket closed at once."""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path

import pytest
from websockets.sync.client import connect as ws_connect

from devtools.live_server import LiveServer, ServerState
from ingest.core.series_ids import series_id
from tests.hooks_sender.test_sender_live import get, run_id, series

STEPS, PER_ENV = 300, 8
MEAN = series_id("reward", "reward", "norm:mean")


def rewards(step: int) -> dict[str, list[float]]:
    return {"countdown": [float((step + i) % 3) for i in range(PER_ENV)],  # 0–2
            "math": [float((step + i) % 2) for i in range(PER_ENV)]}  # 0–1


def post(server: LiveServer, token: str, messages: list[dict]) -> None:
    """POST, then a barrier: the reply comes once run `r`'s aggregates are readable."""
    messages = [*messages, {"v": 1, "id": "barrier", "type": "barrier", "run": "r"}]
    req = urllib.request.Request(server.http + "/api/ingest", data=json.dumps(messages).encode(),
                                 headers={"Authorization": f"Bearer {token}",
                                          "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as resp:
        assert not json.load(resp)["errors"]


def pooled(ranges: dict[str, tuple[float, float]]) -> dict[int, float]:
    out = {}
    for step in range(STEPS):
        vals = [(v - ranges[env][0]) / (ranges[env][1] - ranges[env][0])
                for env, rs in rewards(step).items() for v in rs]
        out[step] = sum(vals) / len(vals)
    return out


def settle_alone(server: LiveServer, rid: int, want: dict[int, float], timeout: float) -> float:
    """Seconds until the run has no step waiting and the normalized mean is `want`, polling
    only the read API (which never triggers aggregation)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if get(server, f"/api/runs/{rid}")["pending_steps"] == 0 and \
                series(server, rid, MEAN)[MEAN] == pytest.approx(want):
            return time.monotonic() - t0
        time.sleep(0.1)
    raise AssertionError(f"not re-normalized after {timeout} s: "
                         f"{get(server, f'/api/runs/{rid}')['pending_steps']} steps left")


def test_declared_ranges_renormalize_in_the_background(live_state: ServerState,
                                                       tmp_path: Path) -> None:
    token = live_state.token("proj")
    server = LiveServer(live_state).start()
    try:
        post(server, token, [{"v": 1, "id": f"{step}-{env}", "type": "samples", "run": "r",
                              "step": step, "env": env, "reward": r,
                              "sample_id": list(range(PER_ENV)), "group_id": [0] * PER_ENV}
                             for step in range(STEPS) for env, r in rewards(step).items()])
        rid = run_id(server, "r")
        # undeclared: each environment by its observed range (0–2 and 0–1)
        observed = {"countdown": (0.0, 2.0), "math": (0.0, 1.0)}
        assert series(server, rid, MEAN)[MEAN] == pytest.approx(pooled(observed))
        # 1. another process declares ranges; nobody is connected
        envs = tmp_path / "envs.yaml"
        envs.write_text("environments:\n  - {name: countdown, reward_min: 0, reward_max: 4}\n"
                        "  - {name: math, reward_min: -1, reward_max: 1}\n")
        live_state.manage("declare_ranges", "--project", "proj", "--run", "r", str(envs))
        took = settle_alone(server, rid, pooled({"countdown": (0, 4), "math": (-1, 1)}), 60)
        print(f"{STEPS} steps re-normalized {took:.2f} s after declare_ranges")
        # 2. a ranges message, its socket closed right after the ack
        with ws_connect(server.ws + "/ws/ingest/",
                        additional_headers={"Authorization": f"Bearer {token}"}) as ws:
            ws.send(json.dumps({"v": 1, "id": "rg", "type": "ranges", "run": "r",
                                "environments": [{"name": "countdown", "reward_min": 0,
                                                  "reward_max": 8}]}))
            assert json.loads(ws.recv(30))["type"] == "ack"
        took = settle_alone(server, rid, pooled({"countdown": (0, 8), "math": (0, 1)}), 60)
        print(f"{STEPS} steps re-normalized {took:.2f} s after a ranges message")
    finally:
        server.stop()
