"""The demo's simulated asynchronous GRPO job (ingest.write.demo_timeline): its events are
the demo's samples generated, scored and trained on in an order that could have happened, its
messages pass the wire validator, and once `manage.py demo` has stored them (the real apply
path and pipeline) the run has its events, gauges, lanes and derived `timing_*` series."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from io import StringIO
from typing import Any

import numpy as np
import orjson
import pytest
from django.core.management import call_command
from django.test import Client

from devtools.live_server import ROOT, LiveServer
from ingest.models import EventBatch, GaugeBatch, Run
from ingest.write.demo import demo_batch, demo_job, demo_messages, demo_steps
from ingest.write.demo_gauges import RANKS, SERVERS, SLOTS
from ingest.write.demo_timeline import AsyncJob, Chunk
from trainer_hooks.wire.protocol import validate_message
from trainer_hooks.wire.schema import MAX_EVENTS_PER_MESSAGE

STEPS = 30  # an eval set (every 25 steps) included


class Whole:
    """The demo's job of STEPS steps, simulated at once."""

    def __init__(self, job: AsyncJob, chunk: Chunk) -> None:
        self.job, self.events, self.gauges = job, chunk.events, chunk.gauges
        self.step_end, self.latest = job.step_end, chunk.latest


@pytest.fixture(scope="module")
def tl() -> Whole:
    return Whole(*demo_job(STEPS))


def rows(tl: Whole, mask: np.ndarray) -> list[dict[str, Any]]:
    ev = tl.events
    return [{k: ev[k][i] for k in ev} for i in np.flatnonzero(mask)]


def same(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> bool:
    return a.keys() == b.keys() and all(
        np.array_equal(a[k], b[k], equal_nan=a[k].dtype == np.float64) for k in a)


def assert_apart(spans: list[tuple[float, float]], lane: Any) -> None:
    spans = sorted(spans)
    for (_, end), (start, _) in zip(spans, spans[1:], strict=False):
        assert start >= end, f"{lane}: a span starts at {start} before the last ends at {end}"


def test_the_job_is_seeded(tl: Whole) -> None:
    again = Whole(*demo_job(STEPS))
    assert same(tl.events, again.events) and same(tl.gauges, again.gauges)
    other = Whole(*demo_job(STEPS, seed=1))
    assert tl.step_end != other.step_end


def test_taken_a_step_at_a_time_the_job_is_the_same_and_forgets_its_past(tl: Whole) -> None:
    parts = []
    for ds in demo_steps("r", STEPS, chunk_steps=1):
        assert ds.chunk is not None
        parts.append(ds.chunk)
        assert ds.end == tl.step_end[ds.step]
    events = {k: np.concatenate([p.events[k] for p in parts]) for k in tl.events}
    gauges = {k: np.concatenate([p.gauges[k] for p in parts]) for k in tl.gauges}
    order = np.lexsort((events["start"], np.fmax(events["end"], events["start"])))
    whole = np.lexsort((tl.events["start"], np.fmax(tl.events["end"], tl.events["start"])))
    assert same({k: v[order] for k, v in events.items()},
                {k: v[whole] for k, v in tl.events.items()})
    def by_series(g: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        order = np.lexsort((g["time"], g["device"], g["name"].astype(str)))
        return {k: v[order] for k, v in g.items()}

    a, b = by_series(gauges), by_series(tl.gauges)
    # the same values, up to rounding: a gauge sums its spans' seconds from another start
    assert np.allclose(a.pop("value"), b.pop("value"), rtol=1e-9)
    assert same(a, b)


def test_a_long_job_holds_only_its_recent_past() -> None:
    job = AsyncJob()
    held = []
    for step in range(60):
        job.advance(step, demo_batch(step, 8, 8, 0))
        if step:
            job.take(job.step_end[step - 1])
            held.append(len(job.kept["name"]) + len(job.rows))
    assert max(held) < 2 * 300  # two steps' events at most, however long the job


def test_every_sample_is_generated_once_as_the_demo_logs_it(tl: Whole) -> None:
    samples = {}
    for msg in demo_messages("r", STEPS, start=0.0, events=False):
        if msg["type"] == "samples":
            for k, sid in enumerate(msg["sample_id"]):
                samples[sid] = (msg["step"], msg["group_id"][k], msg["completion_tokens"][k],
                                msg["discard_reason"][k], msg["off_policy_steps"][k])
    ev = tl.events
    gen = ev["name"] == "generation"
    kept = gen & (ev["status"] != "canceled") & (ev["status"] != "eval")
    ids = ev["sample_id"][kept].tolist()
    assert sorted(ids) == sorted(samples)  # each exactly once
    for row in rows(tl, kept):
        step, group, tokens, discard, off = samples[row["sample_id"]]
        assert row["group_id"] == group and row["tokens"] == tokens
        assert (row["status"] == "discarded") == (discard is not None)
        # made by policy step i−2 (one behind i−1, that step i starts from) or i−1;
        # -1: the initial weights
        assert row["step"] in (max(step - 2, -1), step - 1)
        assert off == step - 1 - row["step"]
    statuses = Counter(ev["status"][gen].tolist())
    assert statuses["canceled"] and statuses["discarded"] and statuses["eval"]
    assert statuses["normal"] > 20 * (statuses["canceled"] + statuses["discarded"])
    canceled = rows(tl, gen & (ev["status"] == "canceled"))
    assert all(r["sample_id"] in samples for r in canceled)  # generated anew later


def test_no_lane_does_two_things_at_once(tl: Whole) -> None:
    ev = tl.events
    for s in range(SERVERS):
        for slot in range(SLOTS):
            lane = (ev["server"] == s) & (ev["slot"] == slot)
            assert set(ev["name"][lane].tolist()) == {"generation", "weight_sync"}
            assert_apart(list(zip(ev["start"][lane], ev["end"][lane], strict=True)), (s, slot))
    for rank in range(RANKS):
        mine = ev["rank"] == rank
        top = mine & ~np.char.count(ev["name"].astype(str), "/").astype(bool)
        assert_apart(list(zip(ev["start"][top], ev["end"][top], strict=True)), rank)
        nested = mine & np.char.startswith(ev["name"].astype(str), "train_step/")
        for step in range(STEPS):
            outer = mine & (ev["name"] == "train_step") & (ev["step"] == step)
            inner = nested & (ev["step"] == step)
            assert inner.sum() == 8  # 4 forward and 4 backward passes
            assert ev["start"][inner].min() >= ev["start"][outer][0]
            assert ev["end"][inner].max() <= ev["end"][outer][0]
    reward = ev["source"] == "reward"
    assert_apart(list(zip(ev["start"][reward], ev["end"][reward], strict=True)), "reward")


def test_a_step_trains_on_a_saved_batch_after_the_last_step(tl: Whole) -> None:
    ev = tl.events
    loop = ev["start"][ev["name"] == "training_loop_start"]
    assert loop.tolist() == [0.0]
    previous = 0.0
    for step in range(STEPS):
        trainer = (ev["source"] == "trainer") & (ev["step"] == step)
        saved = ev["start"][(ev["name"] == "save_batch") & (ev["step"] == step)]
        assert saved.size == 1 and np.isnan(ev["end"][ev["name"] == "save_batch"]).all()
        scored = (ev["name"] == "compute_reward") & (ev["step"] == step)
        assert scored.sum() == 128 and ev["end"][scored].max() <= saved[0]
        assert ev["start"][trainer].min() >= max(saved[0], previous)
        previous = ev["end"][trainer].max()
        assert previous == tl.step_end[step]
        # each server's sync of policy step `step` covers the end of its broadcast
        bcast = (ev["name"] == "weight_broadcast") & (ev["step"] == step)
        sync = (ev["name"] == "weight_sync") & (ev["step"] == step)
        assert sync.sum() == SERVERS * SLOTS
        assert ev["start"][sync].min() >= ev["start"][bcast].min()
        assert ev["end"][sync].min() > ev["end"][bcast].max()
    waits = [tl.job.measured[s]["timing_waiting_for_data"] for s in range(STEPS)]
    assert min(waits) < 0.2 < max(waits)  # sometimes the batch was ready, sometimes not


def test_rank_1_straggles_now_and_then(tl: Whole) -> None:
    ev = tl.events
    step = ev["name"] == "train_step"
    ends = np.full((RANKS, STEPS), np.nan)
    ends[ev["rank"][step], ev["step"][step]] = ev["end"][step] - ev["start"][step]
    slower = ends[1] / ends[0]
    assert (slower > 1.15).sum() >= 2 and (np.abs(slower - 1) < 0.05).sum() > STEPS / 2


def test_gauges_every_ten_seconds_per_device_host_and_server(tl: Whole) -> None:
    g = tl.gauges
    series = Counter(zip(g["name"].tolist(), g["host"].tolist(), g["device"].tolist(),
                         strict=True))
    expected = {(n, "node-1", d) for n in ("gpu/util_pct", "gpu/mem_used_bytes", "gpu/power_w")
                for d in range(4)}
    expected |= {("cpu/util_pct", "node-1", -1), ("host/rss_bytes", "node-1", -1)}
    expected |= {("vllm/num_requests_running", "node-1", s) for s in range(SERVERS)}
    assert set(series) == expected and len(set(series.values())) == 1
    times = np.unique(g["time"])
    assert np.allclose(np.diff(times), 10.0) and times[-1] <= tl.latest
    util = g["value"][g["name"] == "gpu/util_pct"]
    running = g["value"][g["name"] == "vllm/num_requests_running"]
    assert 0 <= util.min() and util.max() <= 100 and 50 < util.mean() < 100
    assert set(running.tolist()) <= {0.0, 1.0, 2.0, 3.0, 4.0} and running.max() == SLOTS


def test_the_messages_are_valid_and_carry_every_event_once(tl: Whole) -> None:
    counts: Counter[str] = Counter()
    for msg in demo_messages("r", STEPS, start=1.7e9, chunk_steps=7):
        if msg["type"] in ("events", "gauges"):
            validated: Any = validate_message(orjson.loads(orjson.dumps(msg)))
            assert 1 <= validated.n <= MAX_EVENTS_PER_MESSAGE
            counts[msg["type"]] += validated.n
            counts[msg["type"] + " messages"] += 1
    assert counts["events"] == tl.events["name"].size
    assert counts["gauges"] == tl.gauges["name"].size
    assert counts["events messages"] == counts["gauges messages"] == 5  # ⌈30 / 7⌉


# ---------------------------------------------------------------- stored by `manage.py demo`


@pytest.mark.django_db(transaction=True)
def test_the_stored_demo_has_its_events_gauges_lanes_and_timing_series() -> None:
    steps = 12
    call_command("demo", "--steps", str(steps), stdout=StringIO())  # stores, then aggregates
    run = Run.objects.get(name="grpo-demo")
    tl = Whole(*demo_job(steps))
    events = EventBatch.objects.filter(run=run)
    gauges = GaugeBatch.objects.filter(run=run)
    assert events.count() == gauges.count() == 2  # 10 steps, then the rest
    assert sum(events.values_list("n", flat=True)) == tl.events["name"].size
    assert sum(gauges.values_list("n", flat=True)) == tl.gauges["name"].size

    client = Client()
    got = read(client, f"/api/runs/{run.pk}/events")
    assert lanes_of(got) == LANES
    ev = got["events"]
    statuses = Counter(s for n, s in zip(ev["name"], ev["status"], strict=True)
                       if n == "generation")
    assert statuses["canceled"] and statuses["discarded"] and statuses["normal"]

    catalog = read(client, f"/api/runs/{run.pk}/catalog")["series"]
    derived = {e["key"]: e["id"] for e in catalog if e["kind"] == "timeline"}
    logged = {e["key"]: e["id"] for e in catalog if e["kind"] == "step"}
    assert {"timing_step_total", "timing_generation_all_pct", "timing_idle_pct",
            "timing_weight_sync_inference_total"} <= set(derived)
    ids = [derived["timing_step_total"], derived["timing_generation_all_pct"],
           logged["timing_step_total"]]
    series = read(client, f"/api/runs/{run.pk}/series?ids=" + ",".join(ids))["series"]
    total, busy, own = (series[i] for i in ids)
    assert total["step"] == busy["step"] == own["step"] == list(range(steps))
    # The step's span from the previous one's end is the same whichever rank measures it.
    assert total["value"] == pytest.approx(own["value"], abs=1e-5)
    assert all(50 < v < 100 for v in busy["value"])  # the slots mostly generate


LANES = ({("trainer", r, None, None) for r in range(RANKS)}
         | {("inference", None, s, k) for s in range(SERVERS) for k in range(SLOTS)}
         | {("orchestrator", None, None, None), ("reward", None, None, None)})


def lanes_of(got: dict[str, Any]) -> set[tuple[Any, ...]]:
    return {(x["source"], x["rank"], x["server"], x["slot"]) for x in got["lanes"]}


def read(client: Client, url: str) -> Any:
    response = client.get(url)
    assert response.status_code == 200, response.content
    return orjson.loads(response.content)


# ---------------------------------------------------------------- streamed by the live demo


def fetch(server: LiveServer, path: str) -> Any:
    with urllib.request.urlopen(server.http + path, timeout=30) as res:
        return json.loads(res.read())


def test_the_live_demo_streams_the_jobs_events_and_gauges_as_they_happen(
        dashboard_server: LiveServer) -> None:
    watched = subprocess.Popen(["sleep", "600"])  # stands in for the server's process
    try:
        began = time.time()
        demo = subprocess.run(
            [sys.executable, "-m", "telescope_ui.live_demo", "--url", dashboard_server.http,
             "--watch-pid", str(watched.pid), "--run", "timeline-live", "--total-steps", "6",
             "--steps-per-second", "20", "--cycles", "1"],
            env=dashboard_server.state.env, cwd=ROOT, capture_output=True, timeout=120)
        ended = time.time()
        assert demo.returncode == 0, demo.stdout.decode() + demo.stderr.decode()
    finally:
        watched.kill()
        watched.wait()
    [run] = [r for r in fetch(dashboard_server, "/api/runs?project=demo")["runs"]
             if r["name"] == "timeline-live"]
    got = fetch(dashboard_server, f"/api/runs/{run['id']}/events")
    assert lanes_of(got) == LANES
    ev = got["events"]
    assert ev["name"].count("save_batch") == 6 and ev["name"].count("train_step") == 12
    # At wall-clock times, while it streamed (the job's time sped up)
    assert began <= min(ev["start"]) and max(e for e in ev["end"] if e is not None) <= ended
    gauges = fetch(dashboard_server, f"/api/runs/{run['id']}/gauges")["gauges"]
    assert {"gpu/util_pct", "cpu/util_pct", "vllm/num_requests_running"} <= set(gauges)
    assert {g["device"] for g in gauges["gpu/util_pct"]} == {0, 1, 2, 3}
