"""Events and gauges end to end on the server: stored through the real HTTP ingest, read back
through the read API (window, Chrome trace, buckets, gauges), the derived `timing_*` series
written by the pipeline (kind `timeline`) and recomputed when late events arrive."""

from __future__ import annotations

from typing import Any

import numpy as np
import orjson
import pytest
from django.test import Client

from ingest.core.timeline_delta import affected
from ingest.models import EventBatch, GaugeBatch, Run

pytestmark = pytest.mark.django_db(transaction=True)

T = 1_700_000_000.0  # a base time


def post(client: Client, token: str, body: Any) -> dict[str, Any]:
    response = client.post("/api/ingest", orjson.dumps(body), content_type="application/json",
                           headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 200, response.content
    reply: dict[str, Any] = orjson.loads(response.content)
    return reply


def get(client: Client, url: str, status: int = 200) -> dict[str, Any]:
    response = client.get(url)
    assert response.status_code == status, response.content
    found: dict[str, Any] = orjson.loads(response.content)
    return found


def events_msg(mid: str, rows: list[dict[str, Any]], run: str = "r") -> dict[str, Any]:
    """An events message from rows (every column given, null where a row lacks it)."""
    cols = ("name", "start", "end", "source", "step", "rank", "server", "slot", "status",
            "tokens", "sample_id", "group_id")
    msg: dict[str, Any] = {"v": 1, "id": mid, "type": "events", "run": run}
    for c in cols:
        if any(c in r for r in rows):
            msg[c] = [r.get(c) for r in rows]
    msg["source"] = [r.get("source", "trainer") for r in rows]
    return msg


def barrier(client: Client, token: str, run: str = "r") -> None:
    reply = post(client, token, {"v": 1, "id": f"b-{T}", "type": "barrier", "run": run})
    assert reply["errors"] == [], reply


def run_id(name: str = "r") -> int:
    return Run.objects.get(name=name).pk


def timeline_points(client: Client, rid: int) -> dict[str, dict[int, float]]:
    catalog = get(client, f"/api/runs/{rid}/catalog")
    sids = {e["key"]: e["id"] for e in catalog["series"] if e["kind"] == "timeline"}
    if not sids:
        return {}
    found = get(client, f"/api/runs/{rid}/series?ids=" + ",".join(sids.values()))["series"]
    return {key: dict(zip(found[sid]["step"], found[sid]["value"], strict=True))
            for key, sid in sids.items()}


TRAINER = [  # two ranks, two steps; rank 1 straggles in step 1
    {"name": "training_loop_start", "start": T},
    {"name": "forward", "start": T + 1, "end": T + 2, "step": 1, "rank": 0},
    {"name": "forward", "start": T + 2, "end": T + 3, "step": 1, "rank": 0},
    {"name": "forward", "start": T + 1, "end": T + 4, "step": 1, "rank": 1},
    {"name": "save_batch", "start": T + 0.5, "step": 1, "source": "orchestrator"},
    {"name": "forward", "start": T + 6, "end": T + 7, "step": 2, "rank": 0},
    {"name": "forward", "start": T + 6, "end": T + 7.5, "step": 2, "rank": 1},
    {"name": "save_batch", "start": T + 5, "step": 2, "source": "orchestrator"},
]


@pytest.fixture
def client() -> Client:
    return Client()


def test_events_are_stored_read_back_and_derive_timing_series(client: Client,
                                                              token: str) -> None:
    reply = post(client, token, events_msg("e1", TRAINER))
    assert reply["errors"] == [] and reply["acks"][0]["id"] == "e1"
    barrier(client, token)
    rid = run_id()
    got = get(client, f"/api/runs/{rid}/events")
    assert got["truncated"] is False and got["extent"] == [T, T + 7.5]
    ev = got["events"]
    assert len(ev["name"]) == len(TRAINER)
    assert ev["start"] == sorted(ev["start"])  # in start order
    first = ev["name"].index("training_loop_start")
    assert ev["end"][first] is None and ev["rank"][first] is None
    assert {(lane["source"], lane["rank"]) for lane in got["lanes"]} == {
        ("trainer", None), ("trainer", 0), ("trainer", 1), ("orchestrator", None)}
    points = timeline_points(client, rid)
    # step 1: rank 0 sums 2 s of forward, rank 1 3 s: the step waited for rank 1
    assert points["timing_forward_total"] == {1: 3.0, 2: 1.5}
    assert points["timing_forward_microbatch_mean"] == {1: 5.0 / 3, 2: 1.25}
    assert points["timing_microbatch_count"] == {1: 2.0, 2: 1.0}
    # step 1 runs T+1 .. T+4 after the loop started at T; step 2 T+6 .. T+7.5
    assert points["timing_step_active"] == {1: 3.0, 2: 1.5}
    assert points["timing_step_total"] == {1: 4.0, 2: 3.5}
    assert points["timing_waiting_for_data"] == {1: 1.0, 2: 2.0}


def test_a_late_generation_changes_its_steps_series(client: Client, token: str) -> None:
    post(client, token, events_msg("e1", TRAINER))
    barrier(client, token)
    rid = run_id()
    assert "timing_generation_all_pct" not in timeline_points(client, rid)
    # A generation of step 2's window (T+0.5, T+5] on one lane arrives after step 2's events:
    # 2.25 s of a 4.5-s window, one lane.
    late = [{"name": "generation", "start": T + 2, "end": T + 4.25, "source": "inference",
             "server": 0, "slot": 0, "step": 1, "tokens": 100, "sample_id": "s-1",
             "group_id": 7}]
    post(client, token, events_msg("e2", late))
    barrier(client, token)
    points = timeline_points(client, rid)
    # Step 1's window (T, T+0.5] has no generation: 0 % busy, 100 % idle, no mean time.
    assert points["timing_generation_all_pct"] == {1: 0.0, 2: 50.0}
    assert points["timing_generation_normal_pct"] == {1: 0.0, 2: 50.0}
    assert points["timing_idle_pct"] == {1: 100.0, 2: 50.0}
    assert points["timing_avg_inference_time"] == {2: 2.25}
    # The same message again changes nothing (its id was seen).
    reply = post(client, token, events_msg("e2", late))
    assert reply["acks"][0].get("duplicate") is True
    assert EventBatch.objects.filter(run_id=rid).count() == 2
    one = get(client, f"/api/runs/{rid}/events?start={T + 4.2}&end={T + 4.3}")["events"]
    assert one["name"] == ["generation"] and one["sample_id"] == ["s-1"]
    assert one["group_id"] == [7] and one["server"] == [0] and one["tokens"] == [100]


def test_a_window_selects_overlapping_events_and_a_source(client: Client, token: str) -> None:
    post(client, token, events_msg("e1", TRAINER))
    rid = run_id()
    got = get(client, f"/api/runs/{rid}/events?start={T + 3.5}&end={T + 6}")["events"]
    # rank 1's step-1 forward (ends T+4) and step 2's save_batch (T+5); step 2's forwards
    # start at T+6: the window is half open
    assert sorted(zip(got["name"], got["start"], strict=True)) == [
        ("forward", T + 1), ("save_batch", T + 5)]
    only = get(client, f"/api/runs/{rid}/events?source=orchestrator")["events"]
    assert only["name"] == ["save_batch", "save_batch"]
    capped = get(client, f"/api/runs/{rid}/events?limit=3")
    assert capped["truncated"] is True and len(capped["events"]["name"]) == 3
    assert capped["events"]["start"] == [T, T + 0.5, T + 1]


def test_the_trace_export_is_a_chrome_trace(client: Client, token: str) -> None:
    post(client, token, events_msg("e1", TRAINER))
    rid = run_id()
    response = client.get(f"/api/runs/{rid}/events.trace.json")
    assert response.status_code == 200
    assert "attachment" in response["Content-Disposition"]
    trace = orjson.loads(response.content)
    spans = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    instants = [e for e in trace["traceEvents"] if e["ph"] == "i"]
    assert len(spans) == 5 and len(instants) == 3
    straggler = next(e for e in spans if e["dur"] == 3e6)
    assert straggler["ts"] == round((T + 1) * 1e6, 3) and straggler["args"]["step"] == 1
    names = {e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"}
    assert {"rank 0", "rank 1"} <= names


def test_performance_buckets(client: Client, token: str) -> None:
    rows = [{"name": "generation", "start": T + 1, "end": T + 9, "source": "inference",
             "server": 0, "slot": s, "tokens": 50} for s in range(2)]
    rows.append({"name": "generation", "start": T + 5, "end": T + 12, "source": "inference",
                 "server": 0, "slot": 0, "status": "canceled"})
    rows.append({"name": "train_step", "start": T + 10, "end": T + 15, "rank": 0, "step": 1})
    post(client, token, events_msg("e1", rows))
    rid = run_id()
    got = get(client, f"/api/runs/{rid}/performance?bucket=10&start={T}&end={T + 20}")
    assert got["bucket"] == 10 and got["time"] == [T, T + 10]
    s = got["series"]
    assert s["generations"] == [2, 0] and s["generations_canceled"] == [0, 1]
    assert s["tokens_per_second"] == [10.0, 0.0]
    # 2 lanes: bucket 0 holds 8 + 8 + 5 s of generation, bucket 1 2 s
    assert s["inference_utilization_pct"] == [pytest.approx(105.0), pytest.approx(10.0)]
    assert s["trainer_working_pct"] == [0.0, 50.0] and s["trainer_idle_pct"] == [100.0, 50.0]
    assert got["partial"] == [False, True]  # the run's latest event (T+15) is in bucket 1
    bad = get(client, f"/api/runs/{rid}/performance?bucket=-1", status=400)
    assert bad["field"] == "bucket"
    assert get(client, f"/api/runs/{rid}/performance?start=x", status=400)["field"] == "start"


def test_gauges_per_name_host_and_device(client: Client, token: str) -> None:
    n = 30
    msg: dict[str, Any] = {"v": 1, "id": "g1", "type": "gauges", "run": "r",
                           "time": [T + i for i in range(n)] * 2,
                           "name": "gpu/util_pct", "value": [float(i) for i in range(2 * n)],
                           "host": "node-1", "device": [0] * n + [1] * n}
    msg["value"][3] = None
    post(client, token, msg)
    post(client, token, {"v": 1, "id": "g2", "type": "gauges", "run": "r", "time": [T],
                         "name": "cpu/util_pct", "value": [12.5], "host": "node-2"})
    rid = run_id()
    assert GaugeBatch.objects.filter(run_id=rid).count() == 2
    got = get(client, f"/api/runs/{rid}/gauges")["gauges"]
    assert sorted(got) == ["cpu/util_pct", "gpu/util_pct"]
    gpu = got["gpu/util_pct"]
    assert [(g["host"], g["device"]) for g in gpu] == [("node-1", 0), ("node-1", 1)]
    assert gpu[0]["value"][3] is None and gpu[1]["value"][0] == float(n)
    assert gpu[0]["downsampled"] is False and len(gpu[0]["time"]) == n
    few = get(client, f"/api/runs/{rid}/gauges?names=gpu/util_pct&max_points=10")["gauges"]
    assert list(few) == ["gpu/util_pct"] and few["gpu/util_pct"][0]["downsampled"] is True
    assert len(few["gpu/util_pct"][0]["time"]) <= 10
    host = get(client, f"/api/runs/{rid}/gauges?host=node-2")["gauges"]
    assert list(host) == ["cpu/util_pct"] and host["cpu/util_pct"][0]["value"] == [12.5]


def test_bad_events_name_the_field(client: Client, token: str) -> None:
    bad = events_msg("e1", [{"name": "forward", "start": T + 2, "end": T + 1}])
    reply = post(client, token, bad)
    assert reply["acks"] == [] and reply["errors"][0]["field"].startswith("end")
    assert not EventBatch.objects.exists()


def test_a_run_without_events_reads_empty(client: Client, token: str) -> None:
    post(client, token, {"v": 1, "id": "s", "type": "step", "run": "r", "step": 0,
                         "metrics": {"a": 1.0}})
    rid = run_id()
    got = get(client, f"/api/runs/{rid}/events")
    assert got["events"]["name"] == [] and got["extent"] == [None, None]
    assert get(client, f"/api/runs/{rid}/performance")["time"] == []
    assert get(client, f"/api/runs/{rid}/gauges")["gauges"] == {}
    assert get(client, "/api/runs/999999/events", status=404)


def test_series_recomputed_in_pieces_equal_the_whole_run(client: Client, token: str,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    """Events arriving over many passes (each pass recomputes only the steps its batches
    touch) leave the series a computation over all of the run's events gives."""
    from ingest.core import eventstore, timeline
    from ingest.pipeline import timeline as passes

    incremental: list[int] = []

    def spy(ev: timeline.EventTable, new: int, index: Any = None) -> Any:
        found = affected(ev, new, index)
        if found is not None:
            incremental.append(found[0].size)
        return found
    monkeypatch.setattr(passes, "affected", spy)

    post(client, token, {"v": 1, "id": "start", "type": "run.start", "run": "r",
                         "config": {"inference_lanes": 2}})
    rows: list[dict[str, Any]] = [{"name": "training_loop_start", "start": T}]
    for step in range(1, 9):
        t = T + 10 * step
        rows += [{"name": "forward", "start": t, "end": t + 2 + (step % 3), "step": step,
                  "rank": r} for r in (0, 1)]
        rows.append({"name": "save_batch", "start": t + 8, "step": step,
                     "source": "orchestrator"})
        rows += [{"name": "generation", "start": t + 8 - 9 * k / 4, "end": t + 8 - 9 * k / 4 + 3,
                  "source": "inference", "server": 0, "slot": k % 2,
                  "status": ["normal", "discarded", "canceled", None][k]} for k in range(4)]
    order = np.random.default_rng(3).permutation(len(rows))
    for i, part in enumerate(np.array_split(order, 7)):
        post(client, token, events_msg(f"p{i}", [rows[j] for j in part.tolist()]))
        barrier(client, token)
    rid = run_id()
    assert len(incremental) >= 3, incremental  # most passes recomputed only some steps
    blobs = [bytes(b) for b in EventBatch.objects.filter(run_id=rid).order_by("id")
             .values_list("data", flat=True)]
    whole = timeline.step_series(eventstore.decode_events(blobs), 2)
    stored = timeline_points(client, rid)
    expected = {key: {int(s): float(v) for s, v in zip(whole.steps, whole.values[:, j],
                                                      strict=True) if v == v}
                for j, key in enumerate(whole.keys)}
    assert stored.keys() == expected.keys()
    for key, points in expected.items():
        assert stored[key] == pytest.approx(points, rel=1e-12), key
