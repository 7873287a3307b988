"""examples/grpo_tiny.py end to end: a real tiny GRPO job streaming to a real server.

The example prints one `step=N key=value ...` line per step with the figures it computed
(reward mean and exact-answer rate of its samples, reduced step metrics); the server must
hold exactly those, for every step, once the run is closed."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from devtools.live_server import LiveServer
from ingest.core.series_ids import series_id

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "grpo_tiny.py"
STEPS, PROMPTS, GROUP = 8, 8, 4
STEP_KEYS = ("entropy", "kl_divergence_inference", "loss", "grad_norm", "learning_rate",
             "num_tokens", "timing_step_total")


def run_example(*args: str, timeout: float = 120) -> tuple[dict[int, dict[str, float]], dict]:
    """Run the example; its per-step printed figures and its final JSON line."""
    out = subprocess.run([sys.executable, "-W", "error", str(EXAMPLE), *args],
                         capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, out.stderr[-3000:]
    printed: dict[int, dict[str, float]] = {}
    for line in out.stdout.splitlines():
        if m := re.match(r"step=(\d+) (.*)", line):
            printed[int(m[1])] = {k: float(v) for k, v in
                                  (kv.split("=") for kv in m[2].split())}
    return printed, json.loads(out.stdout.strip().splitlines()[-1])


def get(server: LiveServer, path: str) -> Any:
    with urllib.request.urlopen(server.http + path, timeout=30) as resp:
        return json.load(resp)


def series(server: LiveServer, rid: int, sids: list[str]) -> dict[str, dict[int, float]]:
    q = urllib.parse.urlencode({"ids": ",".join(sids)})
    got = get(server, f"/api/runs/{rid}/series?{q}")["series"]
    return {sid: dict(zip(got[sid]["step"], got[sid]["value"], strict=True))
            for sid in sids if sid in got}


def settled(server: LiveServer, rid: int, sids: list[str], steps: int,
            timeout: float = 30.0) -> dict[str, dict[int, float]]:
    """The series once each has a point for every step (sample aggregates are materialized
    shortly after the ack), or as they are when `timeout` runs out."""
    deadline = time.monotonic() + timeout
    while True:
        got = series(server, rid, sids)
        if all(len(got.get(s, {})) == steps for s in sids) or time.monotonic() > deadline:
            return got
        time.sleep(0.2)


def test_every_step_of_the_example_reaches_the_dashboard(dashboard_server: LiveServer,
                                                         tmp_path: Path) -> None:
    token = dashboard_server.state.token("p")
    printed, final = run_example(
        "--url", dashboard_server.ws, "--token", token, "--run", "grpo-tiny-test",
        "--steps", str(STEPS), "--prompts", str(PROMPTS), "--group", str(GROUP),
        "--spool-dir", str(tmp_path / "spool"))
    assert final["acknowledged"] is True
    assert sorted(printed) == list(range(1, STEPS + 1))

    runs = get(dashboard_server, "/api/runs")["runs"]
    [run] = [r for r in runs if r["name"] == "grpo-tiny-test"]
    assert (run["status"], run["last_step"]) == ("finished", STEPS)
    rid = run["id"]
    catalog = get(dashboard_server, f"/api/runs/{rid}/catalog")
    [env] = catalog["environments"]
    assert (env["name"], env["reward_min"], env["reward_max"]) == ("digit_sum", 0.0, 1.0)
    assert set(env["metrics_ranges"]) == {"correct", "closeness", "length"}

    step_ids = {k: series_id("step", k) for k in STEP_KEYS}
    reward, correct, count = (series_id("reward", "reward", "mean"),
                              series_id("sample", "correct", "mean"),
                              series_id("reward", "reward", "count"))
    got = settled(dashboard_server, rid, [*step_ids.values(), reward, correct, count], STEPS)
    every_step = range(1, STEPS + 1)
    for key, sid in step_ids.items():
        assert sorted(got[sid]) == list(every_step), key
        assert [got[sid][s] for s in every_step] == pytest.approx(
            [printed[s][key] for s in every_step], rel=1e-5, abs=1e-9), key
    assert [got[count][s] for s in every_step] == [PROMPTS * GROUP] * STEPS
    assert [got[reward][s] for s in every_step] == pytest.approx(
        [printed[s]["reward_mean"] for s in every_step], rel=1e-5)
    assert [got[correct][s] for s in every_step] == pytest.approx(
        [printed[s]["correct"] for s in every_step], rel=1e-5, abs=1e-9)


def test_the_policy_learns_the_task() -> None:
    printed, final = run_example("--steps", "150")
    assert final["acknowledged"] is True  # nothing to send without --url
    first = sum(printed[s]["reward_mean"] for s in range(1, 6)) / 5
    last = sum(printed[s]["reward_mean"] for s in range(146, 151)) / 5
    assert first < 0.15 and last > first + 0.4, (first, last)
