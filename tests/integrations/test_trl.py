"""TRL's GRPOTrainer with `TelescopeCallback` and `telescope_reward`, for real, on CPU.

`trl_job.py` trains a tiny random Llama (built locally, word-level tokenizer, nothing
downloaded) for a few steps against a live server; each process writes what its reward
functions saw and the trainer's own log history. The server must hold exactly that: as many
samples and groups per step as the reward functions scored, the reward mean, completion length
and truncation share TRL itself logged, and every logged key under its mapped name."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devtools.live_server import LiveServer, ServerState, free_port
from tests.integrations.support import Catalog, get_json, run_named

HF_PACKAGES = ("transformers", "trl", "accelerate", "datasets", "tokenizers")
MISSING = [name for name in HF_PACKAGES if importlib.util.find_spec(name) is None]
pytestmark = pytest.mark.skipif(
    bool(MISSING), reason=f"the `hf` extra is not installed (no {', '.join(MISSING)}): "
    "pip install -e '.[hf]'")

JOB = Path(__file__).with_name("trl_job.py")
GENERATIONS = 4  # trl_job.py's num_generations
WEIGHTS = (2.0, 1.0)  # one_process's reward_weights of digits and brevity
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
       "TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": "1"}


def run_job(out: Path, *args: str, world: int = 1, timeout: float = 150) -> list[dict[str, Any]]:
    """Run trl_job.py (on `world` processes); each process's result file, by rank."""
    out.mkdir(parents=True, exist_ok=True)
    if world == 1:
        cmd = [sys.executable, str(JOB)]
    else:
        cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={world}",
               f"--master_port={free_port()}", str(JOB)]
    done = subprocess.run([*cmd, "--out", str(out), *args], env=ENV, capture_output=True,
                          text=True, timeout=timeout)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    return [json.loads((out / f"rank-{r}.json").read_text()) for r in range(world)]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LiveServer, str]]:
    state = ServerState(tmp_path_factory.mktemp("trl-server"), os.environ.get("DATABASE_URL"),
                        os.environ.get("REDIS_URL"))
    token = state.token("trl")
    live = LiveServer(state).start()
    yield live, token
    live.stop()
    state.drop()


@pytest.fixture(scope="module")
def one_process(server: tuple[LiveServer, str],
                tmp_path_factory: pytest.TempPathFactory) -> tuple[Catalog, dict[str, Any]]:
    live, token = server
    tmp = tmp_path_factory.mktemp("trl-one")
    [result] = run_job(tmp / "out", "--url", live.ws, "--token", token, "--name", "trl-one",
                       "--steps", "4", "--spool-dir", str(tmp / "spool"),
                       "--weights", *map(str, WEIGHTS), "--log-completions")
    assert result["closed"] is True, "close() did not confirm everything stored and aggregated"
    result["out"] = str(tmp / "out")
    result["spool"] = str(tmp / "spool")
    return Catalog(live, run_named(live, "trl-one")["id"]), result


def per_step(results: list[dict[str, Any]], fn: str) -> dict[int, list[dict[str, Any]]]:
    """The calls of reward function `fn` on every process, by step."""
    steps: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for result in results:
        for call in result["seen"]:
            if call["fn"] == fn:
                steps[call["step"]].append(call)
    return steps


def trl_logs(result: dict[str, Any]) -> dict[int, dict[str, Any]]:
    return {h["step"]: h for h in result["log_history"] if "reward" in h}


def check_samples_match(catalog: Catalog, results: list[dict[str, Any]],
                        weights: tuple[float, float] = (1.0, 1.0)) -> None:
    """Samples, groups, rewards, lengths and truncation on the server equal what the reward
    functions saw and what TRL logged, step by step (the reward: weighted as TRL sums it)."""
    digits, brevity = per_step(results, "digits"), per_step(results, "brevity")
    logs = trl_logs(next(r for r in results if r["log_history"] is not None))
    assert sorted(digits) == sorted(logs) and digits, (sorted(digits), sorted(logs))
    counts = catalog.values("reward", "reward", "count")
    groups = catalog.values("groups", "groups", "count")
    tied = catalog.values("groups", "groups", "tied")
    means = catalog.values("reward", "reward", "mean")
    lengths = catalog.values("rollouts", "completion_tokens", "mean")
    truncated = catalog.values("rollouts", "stop_reason_length_pct", "stop_reason_length_pct")
    for step, calls in digits.items():
        scored = sum(c["n"] for c in calls)
        assert counts[step] == scored and groups[step] == scored / GENERATIONS
        rewards = [weights[0] * d + weights[1] * b
                   for dc, bc in zip(calls, brevity[step], strict=True)
                   for d, b in zip(dc["rewards"], bc["rewards"], strict=True)]
        assert means[step] == pytest.approx(sum(rewards) / len(rewards), abs=1e-9)
        log = logs[step]
        assert means[step] == pytest.approx(log["reward"], abs=1e-5)
        assert lengths[step] == pytest.approx(log["completions/mean_length"], abs=1e-5)
        assert truncated[step] == pytest.approx(100 * log["completions/clipped_ratio"], abs=1e-4)
        assert tied.get(step, 0) == pytest.approx(log["frac_reward_zero_std"] * groups[step])


def check_advantages(catalog: Catalog, out: Path, steps: int) -> None:
    """Every sample's advantage is the one TRL trained with: the `advantage` column of TRL's
    own completions log (`log_completions`: `completions_<step>.parquet`, every process's
    completions in TRL's global order, which the sample ids follow)."""
    import pandas as pd

    means = catalog.values("advantage", "advantage", "mean")
    assert sorted(means) == list(range(1, steps + 1))  # the Advantage section fills
    for step in range(1, steps + 1):
        table = pd.read_parquet(out / "trainer" / "completions" / f"completions_{step:05d}"
                                ".parquet")
        assert set(table["step"]) == {step}
        want = {f"s{step}-c0-{i}": a for i, a in enumerate(table["advantage"].tolist())}
        body = get_json(catalog.server, f"/api/runs/{catalog.run_id}/samples?step={step}"
                        "&limit=1000")
        assert {s["sample_id"]: s["advantage"] for s in body["samples"]} == want
        assert means[step] == pytest.approx(sum(want.values()) / len(want), abs=1e-9)


def test_each_sample_keeps_the_advantage_trl_trained_with(
        one_process: tuple[Catalog, dict[str, Any]]) -> None:
    catalog, result = one_process
    check_advantages(catalog, Path(result["out"]), 4)


def test_a_delivered_outbox_leaves_no_folder_in_the_spool(
        one_process: tuple[Catalog, dict[str, Any]]) -> None:
    _, result = one_process
    spool = Path(result["spool"])
    assert spool.is_dir()  # the job spooled there
    assert [p.relative_to(spool).as_posix() for p in spool.rglob("*")] == []


def test_groups_and_rewards_equal_what_the_reward_functions_saw(
        one_process: tuple[Catalog, dict[str, Any]]) -> None:
    catalog, result = one_process
    check_samples_match(catalog, [result], WEIGHTS)
    assert result["capture_stats"]["errors"] == 0
    assert catalog.has("reward", "reward", "mean", "arith")  # telescope_reward(env="arith")


def test_logged_keys_arrive_under_their_telescope_names(
        one_process: tuple[Catalog, dict[str, Any]]) -> None:
    catalog, result = one_process
    keys = catalog.step_keys()
    expected = {"loss/total", "grad_norm", "learning_rate", "entropy", "train/kl_mean",
                "train/reward_mean", "train/reward_std", "train/clip_frac",
                "train/response_len_mean", "train/rollout_truncated_frac", "timing_step_total",
                "rewards/digits/mean", "rewards/brevity/std", "clip_ratio/low_mean",
                "train/frac_reward_zero_std", "train/epoch", "summary/train_runtime"}
    assert expected <= keys, expected - keys
    assert not {"loss", "reward", "kl", "step_time"} & keys  # renamed, not duplicated
    logs = trl_logs(result)
    entropy, kl = catalog.values("step", "entropy"), catalog.values("step", "train/kl_mean")
    for step, log in logs.items():
        assert entropy[step] == pytest.approx(log["entropy"], rel=1e-6)
        assert kl[step] == pytest.approx(log["kl"], rel=1e-6, abs=1e-12)


def test_sample_metrics_hold_each_function_log_extra_and_reward_results(
        one_process: tuple[Catalog, dict[str, Any]]) -> None:
    catalog, result = one_process
    # digits and brevity: each function's own reward; digit_count: its log_extra column;
    # words: the sample_metrics of the RewardResults brevity returns. Each function's metric
    # is its raw value (digits has weight 2): what it returned, what TRL logs for it.
    assert {"digits", "brevity", "digit_count", "words"} <= catalog.sample_metrics()
    logs = trl_logs(result)
    for fn in ("digits", "brevity"):
        means = catalog.values("sample", fn, "mean")
        for step, calls in per_step([result], fn).items():
            values = [v for c in calls for v in c["rewards"]]
            assert means[step] == pytest.approx(sum(values) / len(values), abs=1e-9)
            assert means[step] == pytest.approx(logs[step][f"rewards/{fn}/mean"], abs=1e-6)


def test_each_sample_keeps_its_prompt_completion_and_group(
        one_process: tuple[Catalog, dict[str, Any]]) -> None:
    catalog, result = one_process
    if not result["text_columns"]:
        pytest.skip("this trainer_hooks sends no sample text (log_samples has no prompt=)")
    for call in per_step([result], "digits")[1]:
        body = get_json(catalog.server, f"/api/runs/{catalog.run_id}/samples?step=1&text=1"
                        "&limit=1000")
        stored = {s["sample_id"]: s for s in body["samples"]}
        assert body["total"] == call["n"] == len(stored)
        for i, (prompt, completion) in enumerate(zip(call["prompts"], call["completions"],
                                                     strict=True)):
            sample = stored[f"s1-c0-{i}"]  # step 1, first batch, completion i
            assert (sample["prompt"], sample["completion"]) == (prompt, completion)
            assert sample["group_id"] == f"s1-c0-g{i // GENERATIONS}"


def test_the_run_starts_with_the_trainer_arguments(
        one_process: tuple[Catalog, dict[str, Any]]) -> None:
    catalog, _ = one_process
    run = run_named(catalog.server, "trl-one")
    assert run["status"] == "finished" and run["total_steps"] == 4 and run["last_step"] == 4
    config = get_json(catalog.server, f"/api/runs/{run['id']}")["config"]
    assert config["num_generations"] == GENERATIONS and config["beta"] == 0.1
    assert config["max_completion_length"] == 6 and config["run_name"] == "trl-one"
    assert config["model_config"]["num_hidden_layers"] == 1


def test_the_loss_is_the_same_without_telescope(one_process: tuple[Catalog, dict[str, Any]],
                                                tmp_path: Path) -> None:
    _, with_telescope = one_process
    [without] = run_job(tmp_path / "plain", "--steps", "4", "--weights", *map(str, WEIGHTS),
                        "--log-completions")
    keys = ("loss", "grad_norm", "reward", "kl", "entropy")
    trained = [{k: h.get(k) for k in keys} for h in with_telescope["log_history"]]
    plain = [{k: h.get(k) for k in keys} for h in without["log_history"]]
    assert trained == plain and all(math.isfinite(h["loss"]) for h in trained if h["loss"])


def test_two_processes_send_every_rank_samples_once(server: tuple[LiveServer, str],
                                                    tmp_path: Path) -> None:
    """torchrun, 2 CPU processes (gloo): 6 completions per rank, so one prompt group of 4 is
    split across the ranks; the server must count it once, with all 12 samples per step."""
    live, token = server
    results = run_job(tmp_path / "out", "--url", live.ws, "--token", token, "--name",
                      "trl-two", "--steps", "3", "--batch", "6",
                      "--spool-dir", str(tmp_path / "spool"), "--log-completions", world=2)
    assert [r["world"] for r in results] == [2, 2]
    assert results[0]["closed"] is True and results[1]["closed"] is None  # one sender
    assert all(r["capture_stats"]["samples"] == 18 for r in results)  # every rank captured
    catalog = Catalog(live, run_named(live, "trl-two")["id"])
    check_samples_match(catalog, results)
    assert set(catalog.values("groups", "groups", "count").values()) == {3.0}
    check_advantages(catalog, tmp_path / "out", 3)  # each rank's own share, one order


def test_a_reward_function_that_raises_ends_the_run_failed(server: tuple[LiveServer, str],
                                                           tmp_path: Path) -> None:
    """digits raises at step 2 inside TRL's train(); the job catches it (so no process-level
    hook sees it) and the stored run must say `failed`, not stay `running`."""
    live, token = server
    [result] = run_job(tmp_path / "out", "--url", live.ws, "--token", token, "--name",
                       "trl-fails", "--steps", "3", "--fail-at", "2",
                       "--spool-dir", str(tmp_path / "spool"))
    assert result["error"] == "digits fails at step 2"
    assert result["closed"] is True  # the run.end was stored before train() re-raised
    run = run_named(live, "trl-fails")
    assert run["status"] == "failed" and run["last_step"] == 1
