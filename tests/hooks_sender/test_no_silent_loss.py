"""Nothing a trainer logs is lost or merged silently (issue: a re-run under the same run name
stored nothing). Real server processes; each scenario counts what the database holds."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from devtools.live_server import LiveServer, ServerState, free_port
from ingest.core.series_ids import series_id
from tests.hooks_sender.test_sender_live import get, run_id, series, stored_samples
from trainer_hooks import connect
from trainer_hooks.transport.client import Client

STEPS, SAMPLES = 20, 64


def rewards(step: int) -> list[float]:
    return [float((step * 7 + i) % 5) / 4 for i in range(SAMPLES)]


def experiment(url: str, token: str, spool: Path, *, first_step: int = 0,
               **options: Any) -> Client:
    """One run of the same training script: the same run name, the same sample ids."""
    c = connect(url, token, "exp", config={"lr": 1e-6}, spool_dir=spool, **options)
    for step in range(first_step, first_step + STEPS):
        c.log_step(step, {"loss": 1.0 / (step + 1)})
        c.log_samples(step, sample_id=list(range(SAMPLES)),
                      group_id=[i // 8 for i in range(SAMPLES)], reward=rewards(step),
                      env="countdown")
    assert c.close(120), c.not_stored
    return c


def test_the_same_run_name_against_fresh_servers_stores_both_experiments(
        live_state: ServerState, tmp_path: Path) -> None:
    spool, port = tmp_path / "spool", free_port()
    states = [live_state, ServerState(tmp_path / "second", os.environ.get("DATABASE_URL"),
                                      os.environ.get("REDIS_URL"))]
    try:
        for state in states:
            server = LiveServer(state, port=port).start()  # the same URL each time
            try:
                c = experiment(server.ws, state.token("proj"), spool)
                assert c.stats["deduped_samples"] == 0 and c.stats["not_stored"] == 0
                assert c.run_name == "exp"
            finally:
                server.stop()
            n = STEPS * SAMPLES
            assert stored_samples(state, "exp") == {"total": n, "unique": n, "max_copies": 1}
    finally:
        states[1].drop()


def test_a_second_experiment_under_a_used_name_is_a_new_run_and_resume_continues_it(
        dashboard_server: LiveServer, live_state: ServerState, tmp_path: Path) -> None:
    server, token, spool = dashboard_server, live_state.token("proj"), tmp_path / "spool"
    first = experiment(server.ws, token, spool)
    second = experiment(server.ws, token, spool)  # the script run again, same outbox
    assert (first.run_name, second.run_name) == ("exp", "exp-2")
    assert second.run_id != first.run_id and second.stats["deduped_samples"] == 0
    # a reward worker joins the newest run of the name; a resumed trainer continues it
    worker = connect(server.ws, token, "exp", spool_dir=spool, join=True)
    worker.log_samples(STEPS, sample_id=["w0", "w1"], group_id=0, reward=[1.0, 0.0],
                       env="worker")
    assert worker.close(60)
    resumed = experiment(server.ws, token, spool, first_step=STEPS, resume=True)
    assert resumed.run_name == "exp-2" and resumed.run_id == second.run_id
    n = STEPS * SAMPLES
    assert stored_samples(live_state, "exp") == {"total": n, "unique": n, "max_copies": 1}
    assert stored_samples(live_state, "exp-2") == {"total": 2 * n + 2, "unique": 2 * n + 2,
                                                   "max_copies": 1}
    runs = {r["name"]: r for r in get(server, "/api/runs")["runs"]}
    assert set(runs) == {"exp", "exp-2"}
    # close() waited for the aggregates (a barrier): they are readable at once, exactly
    mean = series_id("reward", "reward", "mean", "countdown")
    count = series_id("reward", "reward", "count")
    got = series(server, run_id(server, "exp-2"), mean, count)
    assert got[count] == {**{s: SAMPLES for s in range(2 * STEPS)}, STEPS: SAMPLES + 2}
    assert got[mean] == {s: sum(rewards(s)) / SAMPLES for s in range(2 * STEPS)}


def test_a_resumed_process_does_not_store_its_re_logged_samples_twice(
        dashboard_server: LiveServer, live_state: ServerState, tmp_path: Path) -> None:
    server, token, spool = dashboard_server, live_state.token("proj"), tmp_path / "spool"
    experiment(server.ws, token, spool)
    # restarted from the checkpoint of step 9: steps 10.. are logged again
    again = experiment(server.ws, token, spool, first_step=10, resume=True)
    assert again.stats["deduped_samples"] == 10 * SAMPLES and again.run_name == "exp"
    n = (STEPS + 10) * SAMPLES
    assert stored_samples(live_state, "exp") == {"total": n, "unique": n, "max_copies": 1}


def stored_points(state: ServerState, run: str, key: str) -> dict[str, float]:
    script = (
        "import json\n"
        "from tests.support.points import point_rows\n"
        f"v = [r for r in point_rows(name={run!r}) if (r.kind, r.key) == ('step', {key!r})]\n"
        "print(json.dumps({'n': len(v), 'steps': len({r.step for r in v}),"
        " 'total': sum(r.value for r in v) if v else None}))\n")
    return json.loads(state.manage("shell", "-c", script).strip().splitlines()[-1])


@pytest.mark.timeout(900)  # PostgreSQL takes ~170 s for 50,000 messages
def test_a_burst_of_50000_log_step_calls_stores_all_of_them(
        dashboard_server: LiveServer, live_state: ServerState, tmp_path: Path) -> None:
    n = 50_000
    c = connect(dashboard_server.ws, live_state.token("proj"), "burst",
                spool_dir=tmp_path / "spool")
    t0 = time.perf_counter()
    for step in range(n):
        c.log_step(step, {"a": float(step), "b": 1.0})
    logged = time.perf_counter() - t0
    assert c.close(600), c.not_stored
    stats = c.stats
    assert stats["logged_steps"] == n and stats["not_stored"] == 0
    assert stats["dropped_queue_full"] == 0
    assert stored_points(live_state, "burst", "a") == {"n": n, "steps": n,
                                                      "total": n * (n - 1) / 2}
    assert stats["frames"] < n / 50, stats  # small messages travel in batch frames
    print(f"logged {n} steps in {logged:.2f} s; waited for room {stats['waited_queue_full']}"
          f" times; {stats['frames']} frames")


def test_optimizer_outcome_keys_go_through_log_step_strings_included(
        dashboard_server: LiveServer, live_state: ServerState, tmp_path: Path) -> None:
    import numpy as np

    c = connect(dashboard_server.ws, live_state.token("proj"), "optim",
                spool_dir=tmp_path / "spool")
    outcomes = ["accumulating", "applied", "skipped", "applied"]
    for step, outcome in enumerate(outcomes):
        c.log_step(step, {"optim/update_outcome": np.str_(outcome),
                          "optim/skip_reason": "nonfinite_gradient" if outcome == "skipped"
                          else None,
                          "optim/step_skipped": outcome == "skipped",
                          "optim/attempt_id": np.int64(step), "optim/grad": object()})
    assert not c.close(60)  # one value per step could not be sent: named, not silent
    assert [(e["reason"], e["what"]) for e in c.not_stored] == [
        ("invalid value", f"step {s}: metric 'optim/grad'") for s in range(4)]
    rid = run_id(dashboard_server, "optim")
    keys = ("optim/update_outcome", "optim/skip_reason", "optim/step_skipped",
            "optim/attempt_id")
    got = series(dashboard_server, rid, *(series_id("step", k) for k in keys))
    assert got[series_id("step", "optim/update_outcome")] == dict(enumerate(outcomes))
    assert got[series_id("step", "optim/skip_reason")] == {2: "nonfinite_gradient"}
    assert got[series_id("step", "optim/step_skipped")] == {0: 0.0, 1: 0.0, 2: 1.0, 3: 0.0}
    assert got[series_id("step", "optim/attempt_id")] == {s: float(s) for s in range(4)}
    catalog = get(dashboard_server, f"/api/runs/{rid}/catalog")["series"]
    assert [s["key"] for s in catalog if s.get("categorical")] == [
        "optim/update_outcome", "optim/skip_reason"]
