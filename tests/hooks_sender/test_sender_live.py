"""The sender against the real dashboard server (daphne subprocesses): thousands of steps and
samples while the server is SIGKILLed and restarted and the trainer process is SIGKILLed and
restarted; then every step and sample must be stored exactly once. Also the server's limits
(4401, 4413, 4429), run-start declarations, and replay of already-committed messages."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import msgpack
import pytest

from devtools.live_server import LiveServer, ServerState
from ingest.core.series_ids import series_id
from tests.hooks_sender import trainer_proc
from trainer_hooks import connect
from trainer_hooks.rewards import RewardResult, tool_metrics
from trainer_hooks.transport.client import ingest_url
from trainer_hooks.transport.outbox import Outgoing, open_slot, scope_of
from trainer_hooks.wire.protocol import encode

TRAINER = Path(trainer_proc.__file__)


def get(server: LiveServer, path: str) -> Any:
    with urllib.request.urlopen(server.http + path, timeout=30) as resp:
        return json.load(resp)


def run_id(server: LiveServer, name: str) -> int:
    [run] = [r for r in get(server, "/api/runs")["runs"] if r["name"] == name]
    return int(run["id"])


def series(server: LiveServer, rid: int, *sids: str) -> dict[str, dict[int, float]]:
    q = urllib.parse.urlencode({"ids": ",".join(sids), "max_points": 20000})
    got = get(server, f"/api/runs/{rid}/series?{q}")["series"]
    out = {}
    for sid in sids:
        s = got.get(sid, {"step": [], "value": []})
        assert not s.get("downsampled")
        out[sid] = dict(zip(s["step"], s["value"], strict=True))
    return out


def settled(server: LiveServer, rid: int, want: dict[str, dict[int, float]],
            timeout: float = 60.0) -> dict[str, dict[int, float]]:
    """The series once they equal `want` (sample aggregates are materialized shortly after
    the ack), or as they are when `timeout` runs out."""
    deadline = time.monotonic() + timeout
    while True:
        got = series(server, rid, *want)
        if all(got[k] == pytest.approx(v) for k, v in want.items()) or \
                time.monotonic() > deadline:
            return got
        time.sleep(0.2)


def stored_samples(state: ServerState, run: str) -> dict[str, int]:
    """Raw samples in the database: total, distinct (step, env, sample id), max copies."""
    script = (
        "import json, collections\n"
        "from ingest.models import SampleBatch\n"
        "from ingest.core.columns import decode_batch\n"
        "seen = collections.Counter()\n"
        f"for b in SampleBatch.objects.filter(run__name={run!r}).iterator():\n"
        "    d = decode_batch(b.data)\n"
        "    envs = d.get('env', [''] * d['n'])\n"
        "    for e, s in zip(envs, d['sample_id']):\n"
        "        seen[(b.step, str(e), str(s))] += 1\n"
        "print(json.dumps({'total': sum(seen.values()), 'unique': len(seen),\n"
        "                  'max_copies': max(seen.values(), default=0)}))\n")
    return json.loads(state.manage("shell", "-c", script).strip().splitlines()[-1])


@contextmanager
def servers(state: ServerState) -> Iterator[list[LiveServer]]:
    """Started servers; the test may append restarts. All are stopped at the end."""
    started = [LiveServer(state).start()]
    try:
        yield started
    finally:
        for s in started:
            s.stop()


def wait_for_line(path: Path, needle: str, proc: subprocess.Popen[bytes],
                  timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and needle in path.read_text():
            return
        assert proc.poll() is None, f"trainer exited {proc.returncode}: {path.read_text()}"
        time.sleep(0.05)
    raise AssertionError(f"no {needle!r} in {path.read_text()[-2000:]}")


N_STEPS, N_SAMPLES, PAUSE_AT, EVERY = 2000, 32, 330, 25
WORKER_STEPS, WORKER_SAMPLES = 200, 16


def test_every_step_and_sample_is_stored_exactly_once_across_kills(
        live_state: ServerState, tmp_path: Path) -> None:
    token = live_state.token("proj")
    spool, ckpt = tmp_path / "spool", tmp_path / "ckpt"
    with servers(live_state) as started:
        server = started[0]
        argv = [sys.executable, str(TRAINER), server.ws, token, "grpo-1", str(spool), str(ckpt),
                "--steps", str(N_STEPS), "--samples", str(N_SAMPLES), "--every", str(EVERY),
                "--delay", "0.003"]
        procs: list[subprocess.Popen[bytes]] = []

        def trainer(out: Path, *extra: str) -> subprocess.Popen[bytes]:
            cmd = [*argv, *extra]
            with open(out, "wb") as f, open(out.with_suffix(".err"), "wb") as err:
                procs.append(subprocess.Popen(cmd, stdout=f, stderr=err))
            return procs[-1]

        def sigkill(proc: subprocess.Popen[bytes]) -> None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)

        worker = None
        try:
            # 1. the first trainer logs through PAUSE_AT (checkpointed every EVERY steps) and is
            #    killed with most of its outbox still unsent
            t1_out = tmp_path / "t1.out"
            # The server is down meanwhile, so its outbox is certainly unsent when it dies,
            # however fast the server would have acknowledged it.
            server.stop()
            t1 = trainer(t1_out, "--pause-at", str(PAUSE_AT))
            wait_for_line(t1_out, "paused", t1, 120)

            # 2. a separate reward worker streams samples of another environment, same run
            #    (its outbox opened while the trainer lives, so it does not adopt the trainer's;
            #    the server comes back only once the trainer is dead: it never reached it)
            worker = connect(server.ws, token, "grpo-1", spool_dir=spool, spool_name="worker",
                             backoff_initial=0.1, backoff_max=1.0, join=True)
            assert worker.spool_path is not None  # (its outbox is open: a sender process's too)
            sigkill(t1)
            server = LiveServer(live_state, port=server.port)
            started.append(server.start())
            for step in range(WORKER_STEPS):
                worker.log_samples(step, sample_id=list(range(WORKER_SAMPLES)), group_id=0,
                                   reward=[1.0] * WORKER_SAMPLES, env="worker")
            assert int(ckpt.read_text()) == PAUSE_AT - PAUSE_AT % EVERY - 1

            # 3. the restarted trainer replays the outbox and resumes after the checkpoint; the
            #    server is SIGKILLed mid-stream and restarted on the same port and database;
            #    the trainer is SIGKILLed again at an arbitrary point while logging
            t2_out = tmp_path / "t2.out"
            t2 = trainer(t2_out)
            wait_for_line(t2_out, "step 600", t2, 120)
            server.kill()
            time.sleep(1.0)
            server = LiveServer(live_state, port=server.port)
            started.append(server.start())
            wait_for_line(t2_out, "step 1712", t2, 120)  # not at a checkpoint
            sigkill(t2)

            # 4. the third trainer finishes the run
            t3_out = tmp_path / "t3.out"
            t3 = trainer(t3_out)
            assert t3.wait(300) == 0, (t3_out.read_text()[-3000:],
                                       t3_out.with_suffix(".err").read_text()[-3000:])
            assert worker.flush(120)
        finally:
            if worker is not None:
                worker.close(10)
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait(10)

        t2_text, t3_text = t2_out.read_text(), t3_out.read_text()
        first_resumed = PAUSE_AT - PAUSE_AT % EVERY
        assert t2_text.startswith(f"start {first_resumed} replayed ")
        assert int(t2_text.split()[3]) > 0  # the killed trainer's unsent messages
        # steps after the checkpoint were logged again; their samples were not sent twice
        first_ckpt = next(line for line in t2_text.splitlines() if line.startswith("ckpt"))
        assert first_ckpt.split()[3] == str((PAUSE_AT - first_resumed + 1) * N_SAMPLES)
        stats = json.loads(t3_text.split("stats ", 1)[1])
        assert stats["pending"] == 0 and stats["logged_steps"] < N_STEPS - 1700 + EVERY

        rid = run_id(server, "grpo-1")
        loss, echo = series_id("step", "loss"), series_id("step", "echo/step")
        count = series_id("reward", "reward", "count", "countdown")
        mean = series_id("reward", "reward", "mean", "countdown")
        wcount = series_id("reward", "reward", "count", "worker")
        steps = range(N_STEPS)
        want = {
            loss: {s: trainer_proc.loss(s) for s in steps},
            echo: {s: float(s) for s in steps},
            count: {s: N_SAMPLES for s in steps},
            mean: {s: sum(trainer_proc.rewards(s, N_SAMPLES)) / N_SAMPLES for s in steps},
            wcount: {s: WORKER_SAMPLES for s in range(WORKER_STEPS)},
        }
        got = settled(server, rid, want)
        for sid, values in want.items():
            assert got[sid] == pytest.approx(values), sid
        raw = stored_samples(live_state, "grpo-1")
        want_n = N_STEPS * N_SAMPLES + WORKER_STEPS * WORKER_SAMPLES
        assert raw == {"total": want_n, "unique": want_n, "max_copies": 1}
        assert get(server, f"/api/runs/{rid}")["status"] == "finished"


def test_limits_bad_token_too_large_and_rate_limited(live_state: ServerState,
                                                     tmp_path: Path) -> None:
    live_state.env.update(TELESCOPE_MAX_MESSAGE_BYTES=str(64 * 1024),
                          TELESCOPE_MAX_MESSAGES_PER_SECOND="40", TELESCOPE_RATE_BURST="20")
    token = live_state.token("proj")
    with servers(live_state) as [server]:
        bad = connect(server.ws, "tsk_wrong", "limits", spool_dir=tmp_path, spool_name="bad")
        bad.log_step(0, {"a": 1.0})
        assert not bad.flush(10)
        assert not bad.close(1)

        c = connect(server.ws, token, "limits", spool_dir=tmp_path, max_batch_bytes=1 << 20,
                    backoff_initial=0.05, backoff_max=0.5)
        wide = {f"wide/key_{i}": float(i) for i in range(5000)}  # > 64 KiB in one message
        c.log_step(0, wide)
        for step in range(1, 120):
            c.log_step(step, {"loss": float(step)})
        for step in range(4):
            n = 3000
            c.log_samples(step, sample_id=[f"{step}-{i}" for i in range(n)], group_id=0,
                          reward=[float(i % 2) for i in range(n)],
                          metrics={"m": [float(i) for i in range(n)]})
        assert c.flush(120), (c.not_stored, c.stats)
        stats = c.stats
        assert c.close(10)
        assert stats["splits"] >= 2 and stats["rejected"] == 0
        assert stats["connects"] > 2  # reconnected after 4413 and 4429 closes

        rid = run_id(server, "limits")
        want: dict[str, dict[int, float]] = {
            series_id("step", "loss"): {s: float(s) for s in range(1, 120)},
            series_id("step", "wide/key_4999"): {0: 4999.0},
            series_id("reward", "reward", "count"): {s: 3000 for s in range(4)},
        }
        assert settled(server, rid, want) == want
        assert stored_samples(live_state, "limits")["max_copies"] == 1
        # the bad-token client's messages wait in its own outbox, for that token (another
        # token is another project: they are never replayed there)
        assert stats["replayed"] == 0
        assert series(server, rid, series_id("step", "a"))[series_id("step", "a")] == {}


class Countdown:
    name = "countdown"
    metrics_ranges = {"correct": {"min": 0.0, "max": 1.0}}


def test_declarations_rewards_and_replayed_duplicates(live_state: ServerState,
                                                      tmp_path: Path) -> None:
    token = live_state.token("proj")
    envs = tmp_path / "envs.yaml"
    envs.write_text("environments:\n  - name: countdown\n    reward_min: 0\n    reward_max: 2\n"
                    "    dataset: whatever\n")
    with servers(live_state) as [server]:
        # messages the server committed whose acks the previous process never saw
        committed = [{"v": 1, "id": f"old-{s}", "type": "samples", "run": "decl", "step": s,
                      "sample_id": ["a", "b"], "group_id": [0, 0], "reward": [0.0, 2.0],
                      "env": "countdown"} for s in range(3)]
        req = urllib.request.Request(
            server.http + "/api/ingest", data=msgpack.packb(committed), method="POST",
            headers={"Authorization": f"Bearer {token}",
                     "Content-Type": "application/msgpack"})
        with urllib.request.urlopen(req, timeout=30) as resp:
            assert len(json.load(resp)["acks"]) == 3
        slot = open_slot(tmp_path / "spool", "decl", scope=scope_of(ingest_url(server.ws), token))
        slot.append([Outgoing(m["id"], "samples", 2, "msgpack", encode(m, "msgpack"))
                     for m in committed])
        slot.close()

        c = connect(server.ws, token, "decl", config={"lr": 1e-6, "path": Path("/x")},
                    environments=[str(envs), Countdown], spool_dir=tmp_path / "spool",
                    encoding="json")
        rec = c.reward_recorder(env="countdown")
        rec.set_step(3)
        for i in range(4):
            rec.record(RewardResult(float(i % 3), {"correct": float(i % 2)}),
                       sample_id=f"s{i}", group_id=i // 2,
                       tool_metrics=tool_metrics({"add": i}, errors=0))
        rec.annotate([f"s{i}" for i in range(4)], advantage=[-1.0, 1.0, -1.0, 1.0],
                     completion_tokens=[10, 20, 30, 40])
        assert c.flush(30)
        stats = c.stats
        assert c.close(10)
        assert stats["replayed"] == 3 and stats["duplicates"] == 3

        rid = run_id(server, "decl")
        catalog = get(server, f"/api/runs/{rid}/catalog")
        assert catalog["environments"] == [
            {"name": "countdown", "weight": 1.0, "reward_min": 0.0, "reward_max": 2.0,
             "metrics_ranges": {"correct": {"min": 0.0, "max": 1.0, "invert": False}}}]
        count = series_id("reward", "reward", "count")
        tools = series_id("sample", "total_tool_calls", "mean", "countdown")
        adv = series_id("advantage", "advantage", "mean")
        want: dict[str, dict[int, float]] = {
            count: {0: 2, 1: 2, 2: 2, 3: 4},  # the replayed batches counted once
            tools: {3: 1.5}, adv: {3: 0.0}}
        assert settled(server, rid, want) == want
        assert get(server, f"/api/runs/{rid}")["status"] == "running"

        # later declarations replace the run's ranges
        c2 = connect(server.ws, token, "decl", spool_dir=tmp_path / "spool", resume=True)
        c2.declare_ranges([{"name": "countdown", "reward_min": -1, "reward_max": 1},
                           {"name": "broken", "reward_min": 1, "reward_max": 0}])
        assert not c2.flush(30)  # delivered, but a declaration was left out (counted)
        assert c2.stats["invalid_calls"] == 1
        assert c2.close(10, status="failed")
        envs_now = get(server, f"/api/runs/{rid}/catalog")["environments"]
        assert [(e["name"], e["reward_min"], e["reward_max"]) for e in envs_now] == [
            ("countdown", -1.0, 1.0)]
        assert get(server, f"/api/runs/{rid}")["status"] == "failed"
