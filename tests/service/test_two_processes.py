"""Two real daphne processes sharing PostgreSQL and Redis."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.request
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import numpy as np
import orjson
import pytest
import websockets

from devtools.live_server import LiveServer, ServerState

pytestmark = pytest.mark.service


@pytest.fixture
def servers(service_state: ServerState) -> Iterator[tuple[LiveServer, LiveServer, str]]:
    a, b = LiveServer(service_state).start(), LiveServer(service_state).start()
    yield a, b, service_state.token("svc")
    a.stop()
    b.stop()


async def send_all(server: LiveServer, token: str, messages: list[dict[str, Any]]
                   ) -> list[dict[str, Any]]:
    """Pipeline every message on one connection, then collect one reply per message."""
    headers = {"Authorization": f"Bearer {token}"}
    async with websockets.connect(server.ws + "/ws/ingest/", additional_headers=headers,
                                  max_size=None) as ws:
        for msg in messages:
            await ws.send(orjson.dumps(msg).decode())
        return [json.loads(await asyncio.wait_for(ws.recv(), 30)) for _ in messages]


def get(server: LiveServer, path: str) -> Any:
    with urllib.request.urlopen(server.http + path, timeout=10) as response:
        return json.loads(response.read())


def samples(mid: str, run: str, step: int, cols: dict[str, np.ndarray],
            idx: np.ndarray) -> dict[str, Any]:
    return {"v": 1, "id": mid, "type": "samples", "run": run, "step": step,
            "sample_id": cols["sid"][idx].tolist(), "group_id": cols["gid"][idx].tolist(),
            "reward": cols["reward"][idx].tolist(), "env": cols["env"][idx].tolist(),
            "metrics": {"len": cols["len"][idx].tolist()}}


def step_values(server: LiveServer, run_name: str, step: int) -> dict[str, float]:
    run = next(r for r in get(server, "/api/runs")["runs"] if r["name"] == run_name)
    ids = [s["id"] for s in get(server, f"/api/runs/{run['id']}/catalog")["series"]]
    if not ids:  # aggregates not materialized yet
        return {}
    got = get(server, f"/api/runs/{run['id']}/series?ids=" + ",".join(quote(i, safe="")
                                                                     for i in ids))
    return {sid: s["value"][s["step"].index(step)] for sid, s in got["series"].items()
            if step in s["step"]}


def settled(server: LiveServer, run: str, step: int, n: int) -> dict[str, float]:
    """Aggregates are materialized shortly after the acks: wait until all n samples count."""
    deadline = time.monotonic() + 30
    while (values := step_values(server, run, step)).get("reward|reward|count|") != n:
        assert time.monotonic() < deadline, values.get("reward|reward|count|")
        time.sleep(0.05)
    return values


async def test_a_step_split_across_two_processes_aggregates_exactly(servers) -> None:  # type: ignore[no-untyped-def]
    a, b, token = servers
    rng = np.random.default_rng(42)
    n = 4096
    cols = {"sid": np.array([f"s{i}" for i in range(n)]),
            "gid": (np.arange(n) // 8).astype(str),
            "reward": rng.normal(0.5, 1.0, n), "env": rng.choice(["x", "y"], n),
            "len": rng.integers(10, 500, n).astype(float)}
    parts = np.array_split(rng.permutation(n), 16)
    msgs = [samples(f"part-{k}", "split", 7, cols, idx) for k, idx in enumerate(parts)]
    # Each process gets half the parts, and a few parts go to both (same id: applied once).
    to_a, to_b = msgs[0::2] + msgs[1:4], msgs[1::2] + msgs[0:3]

    both = await asyncio.gather(send_all(a, token, to_a), send_all(b, token, to_b))
    replies = [r for rs in both for r in rs]
    assert all(r["type"] == "ack" for r in replies)
    assert sum(1 for r in replies if r.get("duplicate")) == 6
    await send_all(a, token, [samples("whole", "whole", 7, cols, np.arange(n))])

    split, whole = settled(b, "split", 7, n), settled(a, "whole", 7, n)
    assert split == whole  # bitwise, whichever process stored which part
    r = cols["reward"]
    assert split["reward|reward|count|"] == n
    assert split["reward|reward|mean|"] == pytest.approx(r.mean(), rel=1e-12)
    assert split["reward|reward|std|"] == pytest.approx(r.std(ddof=1), rel=1e-12)
    assert (split["reward|reward|min|"], split["reward|reward|max|"]) == (r.min(), r.max())
    assert split["groups|groups|count|"] == n // 8
    sel = cols["env"] == "y"
    assert split["sample|len|mean|y"] == pytest.approx(cols["len"][sel].mean(), rel=1e-12)


async def test_a_page_on_one_process_sees_points_ingested_through_the_other(servers) -> None:  # type: ignore[no-untyped-def]
    a, b, token = servers
    first = {"v": 1, "id": "s0", "type": "step", "run": "live", "step": 0,
             "metrics": {"loss": 1.0}}
    await send_all(a, token, [first])
    run = get(b, "/api/runs")["runs"][0]
    seq = get(b, f"/api/runs/{run['id']}/catalog")["seq"]

    async def watch_and_ingest() -> list[dict[str, Any]]:
        async with websockets.connect(b.ws + "/ws/live/", origin=b.http) as page:
            await page.send(json.dumps({"type": "subscribe", "run": run["id"],
                                        "after_seq": seq}))
            replay = json.loads(await asyncio.wait_for(page.recv(), 10))
            assert (replay["type"], replay["seq"]) == ("delta", seq)
            steps = [{**first, "id": f"s{i}", "step": i, "metrics": {"loss": 1.0 / i}}
                     for i in range(1, 4)]
            await send_all(a, token, steps)
            deltas: list[dict[str, Any]] = []
            while not deltas or deltas[-1]["seq"] < seq + 3:
                msg = json.loads(await asyncio.wait_for(page.recv(), 10))
                if msg["type"] == "delta":
                    deltas.append(msg)
            return deltas

    deltas = await watch_and_ingest()
    assert deltas[0]["from_seq"] == seq
    points = [(s, v) for d in deltas for s, v in zip(d["points"]["step|loss||"]["step"],
                                                      d["points"]["step|loss||"]["value"],
                                                      strict=True)]
    assert points == [(1, 1.0), (2, 0.5), (3, 1.0 / 3)]
