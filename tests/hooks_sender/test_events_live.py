"""Spans, events and gauges against the real dashboard server (daphne subprocesses): what the
trainer's ranks, the inference side, the system sampler and a Prometheus watcher log is read
back through the read API exactly as logged (every row once, fields intact), the derived
`timing_*` series follow from it; a message too large for the server is split and a server
killed and restarted mid-stream loses and repeats nothing."""

from __future__ import annotations

import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, Gauge, start_http_server

from devtools.live_server import LiveServer, ServerState
from tests.hooks_sender.test_sender_live import get, run_id, servers
from trainer_hooks import connect, watch_prometheus
from trainer_hooks.metrics.timing import Timeline


def events(server: LiveServer, rid: int, **params: Any) -> dict[str, Any]:
    query = urllib.parse.urlencode(params)
    found: dict[str, Any] = get(server, f"/api/runs/{rid}/events?{query}")
    return found


def rows(found: dict[str, Any]) -> list[dict[str, Any]]:
    cols = found["events"]
    return [dict(zip(cols, values, strict=True)) for values in zip(*cols.values(), strict=True)]


class FakeClock:
    """A trainer clock the test drives, so each region's length is known."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def vllm() -> Iterator[str]:
    registry = CollectorRegistry()
    running = Gauge("vllm:num_requests_running", "running", ["model_name"], registry=registry)
    running.labels("m").set(6)
    httpd, thread = start_http_server(0, addr="127.0.0.1", registry=registry)
    yield f"http://127.0.0.1:{httpd.server_port}/metrics"
    httpd.shutdown()
    httpd.server_close()
    thread.join(10)


def test_every_span_event_and_gauge_is_stored_once_as_logged(
        live_state: ServerState, tmp_path: Path, vllm: str) -> None:
    token = live_state.token("proj")
    with servers(live_state) as [server]:
        owner = connect(server.ws, token, "where", spool_dir=tmp_path, system_metrics=3600.0)
        other = connect(server.ws, token, "where", spool_dir=tmp_path, spool_name="rank-1",
                        join=True)
        watcher = watch_prometheus(owner, vllm, prefix="vllm/", interval=3600.0)
        forward = {0: [0.5, 0.25], 1: [0.75, 0.5]}  # per rank, per step
        for rank, client in ((0, owner), (1, other)):
            clock = FakeClock()
            timeline = Timeline(clock=clock, client=client, rank=rank)
            for step in range(2):
                with timeline.region("forward"):
                    clock.now += forward[rank][step]
                with timeline.region("optimizer_step"):
                    clock.now += 0.1
                timeline.step_metrics(step=step)
        for i in range(40):
            with owner.span("generation", source="inference", server="vllm-0", slot=i % 4,
                            step=0, sample_id=f"s{i}", group_id=i // 8) as sp:
                sp.tokens = i
                sp.status = "discarded" if i % 10 == 0 else None
        owner.log_events(name="training_loop_start", start=time.time() - 60,
                         source="orchestrator")
        owner.log_gauges(name="custom/queue_depth", value=[1.0, 2.0], time=[100.0, 110.0],
                         host="node-1")
        deadline = time.monotonic() + 30
        while watcher.scrapes < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert other.close(30)
        assert owner.close(30, status="finished"), (owner.not_stored, owner.stats)

        rid = run_id(server, "where")
        got = rows(events(server, rid))
        assert len(got) == 8 + 40 + 1 and not events(server, rid)["truncated"]
        trainer = [e for e in got if e["source"] == "trainer"]
        assert sorted((e["rank"], e["step"], e["name"]) for e in trainer) == sorted(
            (rank, step, name) for rank in (0, 1) for step in (0, 1)
            for name in ("forward", "optimizer_step"))
        for e in trainer:
            if e["name"] == "forward":
                assert e["end"] - e["start"] == pytest.approx(forward[e["rank"]][e["step"]])
        generations = sorted((e for e in got if e["name"] == "generation"),
                             key=lambda e: e["tokens"])
        assert [e["sample_id"] for e in generations] == [f"s{i}" for i in range(40)]
        assert [e["group_id"] for e in generations] == [i // 8 for i in range(40)]
        assert [e["slot"] for e in generations] == [i % 4 for i in range(40)]
        assert {e["server"] for e in generations} == {"vllm-0"}
        assert [e["status"] for e in generations] == [
            "discarded" if i % 10 == 0 else None for i in range(40)]
        assert all(e["end"] >= e["start"] for e in generations)
        [loop] = [e for e in got if e["name"] == "training_loop_start"]
        assert loop["end"] is None and loop["source"] == "orchestrator"

        gauges = get(server, f"/api/runs/{rid}/gauges")["gauges"]
        assert {"host/rss_bytes", "host/mem_used_bytes", "vllm/num_requests_running",
                "custom/queue_depth"} <= set(gauges)
        [queue] = gauges["custom/queue_depth"]
        assert (queue["host"], queue["time"], queue["value"]) == ("node-1", [100.0, 110.0],
                                                                  [1.0, 2.0])
        [running] = gauges["vllm/num_requests_running"]
        assert running["value"] == [6.0]

        catalog = get(server, f"/api/runs/{rid}/catalog")["series"]
        derived = {s["key"]: s["id"] for s in catalog if s["kind"] == "timeline"}
        sid = derived["timing_forward_total"]
        q = urllib.parse.urlencode({"ids": sid})
        series = get(server, f"/api/runs/{rid}/series?{q}")["series"][sid]
        # the rank the step waited for: the max over ranks of each rank's forward total
        assert dict(zip(series["step"], series["value"], strict=True)) == pytest.approx(
            {0: 0.75, 1: 0.5})


def test_a_message_too_large_is_split_and_a_restart_loses_nothing(
        live_state: ServerState, tmp_path: Path) -> None:
    live_state.env.update(TELESCOPE_MAX_MESSAGE_BYTES=str(32 * 1024))
    token = live_state.token("proj")
    n = 6000
    with servers(live_state) as started:
        c = connect(started[0].ws, token, "big", spool_dir=tmp_path,
                    backoff_initial=0.05, backoff_max=0.5)
        for i in range(n // 2):
            with c.span("generation", source="inference", server=0, slot=i % 8,
                        sample_id=f"sample-{i:06d}"):
                pass
        assert c.flush(60), c.not_stored
        started[0].kill()  # SIGKILL: what was acknowledged is committed
        for i in range(n // 2, n):
            with c.span("generation", source="inference", server=0, slot=i % 8,
                        sample_id=f"sample-{i:06d}"):
                pass
        c.sync(30)  # in the outbox while the server is away
        started.append(LiveServer(live_state, port=started[0].port).start())
        assert c.flush(120), c.not_stored
        stats = c.stats
        assert c.close(30)
        assert stats["splits"] >= 1 and stats["rejected"] == 0
        rid = run_id(started[1], "big")
        ids = events(started[1], rid)["events"]["sample_id"]
        assert len(ids) == n and sorted(ids) == [f"sample-{i:06d}" for i in range(n)]
