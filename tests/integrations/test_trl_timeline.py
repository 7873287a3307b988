"""A real TRL GRPOTrainer run fills the Timeline: `trl_job.py` (the tiny random Llama, CPU,
two processes) trains against a live server with `TelescopeCallback`; the events the server
stored (GET /api/runs/<id>/events) must be
the run's spans — per rank, at the steps TRL logged, nested spans inside their parents, each
generation before the reward that scores it and the step that trains on it — and TRL's
profiling timers must arrive as `profiling/<name>` step metrics; the server's derived
`timing_*` series must follow from those events.

TRL's `sync_weights` (vLLM only, not installed here) is checked through TRL's own
`profiling_context` and `profiling_decorator` on a minimal trainer-like object."""

from __future__ import annotations

import os
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from devtools.live_server import LiveServer, ServerState
from tests.integrations.support import Catalog, get_json, run_named
from tests.integrations.test_trl import pytestmark as hf_installed
from tests.integrations.test_trl import run_job, trl_logs

pytestmark = hf_installed

STEPS = 3
SPANS = {"training_loop_start", "generation", "compute_reward", "compute_reward/digits",
         "compute_reward/brevity", "save_batch", "train_step", "train_step/forward",
         "train_step/backward", "optimizer_step"}
PROFILING = {"profiling/transformers.generate", "profiling/_calculate_rewards",
             "profiling/compute_loss", "profiling/_prepare_inputs", "profiling/digits",
             "profiling/brevity", "profiling/_get_per_token_logps_and_entropies"}

Event = dict[str, Any]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LiveServer, str]]:
    state = ServerState(tmp_path_factory.mktemp("trl-timeline-server"),
                        os.environ.get("DATABASE_URL"), os.environ.get("REDIS_URL"))
    token = state.token("trl")
    live = LiveServer(state).start()
    yield live, token
    live.stop()
    state.drop()


def train(server: tuple[LiveServer, str], tmp: Path, name: str, world: int,
          *args: str) -> tuple[Catalog, list[dict[str, Any]], list[Event]]:
    """Run trl_job.py on `world` processes; the run's catalog, the job's results and the
    events the server stored (rows)."""
    live, token = server
    results = run_job(tmp / "out", "--url", live.ws, "--token", token, "--name", name,
                      "--steps", str(STEPS), "--spool-dir", str(tmp / "spool"), *args,
                      world=world)
    assert results[0]["closed"] is True, "close() did not confirm everything stored"
    run_id = run_named(live, name)["id"]
    body = get_json(live, f"/api/runs/{run_id}/events")
    assert body["truncated"] is False
    cols = body["events"]
    rows = [{k: cols[k][i] for k in cols} for i in range(len(cols["name"]))]
    return Catalog(live, run_id), results, rows


@pytest.fixture(scope="module")
def run(server: tuple[LiveServer, str], tmp_path_factory: pytest.TempPathFactory
        ) -> tuple[Catalog, list[dict[str, Any]], list[Event]]:
    """torchrun, 2 CPU processes (gloo), 6 completions per rank: one run for every check
    (the single-process path sends the same columns without the gather)."""
    return train(server, tmp_path_factory.mktemp("tl-two"), "tl-two", 2, "--batch", "6")


def by(rows: list[Event], name: str) -> list[Event]:
    return [r for r in rows if r["name"] == name]


def inside(child: Event, parent: Event) -> bool:
    return bool(parent["start"] <= child["start"] <= child["end"] <= parent["end"])


def check_steps(results: list[dict[str, Any]], rows: list[Event]) -> None:
    """Per rank and logged step: one train_step holding its forwards and backwards, then one
    optimizer_step; the step's batch generated (policy step s − 1), scored and saved before."""
    world = results[0]["world"]
    logged = sorted(trl_logs(results[0]))
    assert logged == list(range(1, STEPS + 1))
    assert SPANS <= {r["name"] for r in rows}, SPANS - {r["name"] for r in rows}
    assert "weight_broadcast" not in {r["name"] for r in rows}  # no vLLM: no weights moved
    trainer = [r for r in rows if r["source"] == "trainer"]
    assert {r["rank"] for r in trainer} == set(range(world))
    assert all(r["status"] is None for r in rows)  # training only, nothing evaluated
    loop_start = {r["rank"]: r["start"] for r in by(rows, "training_loop_start")}
    assert sorted(loop_start) == list(range(world))
    assert all(r["end"] is None for r in by(rows, "training_loop_start") + by(rows, "save_batch"))
    for rank in range(world):
        mine = [r for r in trainer if r["rank"] == rank]
        steps = [r["step"] for r in by(mine, "train_step")]
        assert sorted(steps) == logged, (rank, steps)  # one each, at the logged steps
        assert sorted(r["step"] for r in by(mine, "optimizer_step")) == logged
        for step in logged:
            [parent] = [r for r in by(mine, "train_step") if r["step"] == step]
            [optimizer] = [r for r in by(mine, "optimizer_step") if r["step"] == step]
            children = [r for r in mine
                        if r["step"] == step and r["name"].startswith("train_step/")]
            assert Counter(r["name"] for r in children) == {"train_step/forward": 1,
                                                            "train_step/backward": 1}
            assert all(inside(c, parent) for c in children), (parent, children)
            [fwd] = by(children, "train_step/forward")
            [bwd] = by(children, "train_step/backward")
            assert fwd["end"] <= bwd["start"] and parent["end"] <= optimizer["start"]
            assert optimizer["start"] <= optimizer["end"]
            check_batch(rows, rank, step, parent, loop_start[rank])


def check_batch(rows: list[Event], slot: int, step: int, train_step: Event,
                loop_start: float) -> None:
    """The batch of `step` on `slot`: generated by policy step − 1 on inference lane (0, slot),
    then scored (compute_reward with each function inside), then saved, then trained on."""
    lane = [r for r in rows if r["server"] == 0 and r["slot"] == slot]
    [gen] = [r for r in by(lane, "generation") if r["step"] == step - 1]
    [reward] = [r for r in by(lane, "compute_reward") if r["step"] == step]
    [saved] = [r for r in by(lane, "save_batch") if r["step"] == step]
    assert (gen["source"], reward["source"], saved["source"]) == ("inference", "reward",
                                                                  "orchestrator")
    assert gen["rank"] is None and gen["tokens"] > 0
    fns = [r for r in lane if r["step"] == step and r["name"].startswith("compute_reward/")]
    assert sorted(r["name"] for r in fns) == ["compute_reward/brevity", "compute_reward/digits"]
    assert all(inside(f, reward) for f in fns)
    assert loop_start <= gen["start"] < gen["end"] <= reward["start"]
    assert reward["end"] <= saved["start"] <= train_step["start"]


def check_tokens(catalog: Catalog, rows: list[Event]) -> None:
    """A step's generations hold as many tokens as its samples' completions."""
    for step in range(1, STEPS + 1):
        samples = get_json(catalog.server, f"/api/runs/{catalog.run_id}/samples?step={step}"
                           "&limit=1000")["samples"]
        generated = sum(r["tokens"] for r in by(rows, "generation") if r["step"] == step - 1)
        assert generated == sum(s["completion_tokens"] for s in samples) > 0


def test_every_rank_fills_its_lanes(
        run: tuple[Catalog, list[dict[str, Any]], list[Event]]) -> None:
    catalog, results, rows = run
    assert [r["world"] for r in results] == [2, 2]
    check_steps(results, rows)
    check_tokens(catalog, rows)
    per_lane = defaultdict(list)
    for r in by(rows, "generation"):
        per_lane[r["slot"]].append(r["step"])
    assert {k: sorted(v) for k, v in per_lane.items()} == {0: [0, 1, 2], 1: [0, 1, 2]}


def test_trl_profiling_timers_arrive_as_step_metrics(
        run: tuple[Catalog, list[dict[str, Any]], list[Event]]) -> None:
    catalog, _, rows = run
    keys = catalog.step_keys()
    assert PROFILING <= keys, PROFILING - keys
    for key in PROFILING:
        values = catalog.values("step", key)
        assert sorted(values) == list(range(1, STEPS + 1)), (key, values)
        assert all(v > 0 for v in values.values()), (key, values)
    # one call's time, not a sum: TRL times compute_loss (once a step here) inside the
    # forward span (1e-5: the stored times are unix seconds, to the microsecond); the main
    # process's figures
    forward = {r["step"]: r["end"] - r["start"] for r in by(rows, "train_step/forward")
               if r["rank"] == 0}
    loss = catalog.values("step", "profiling/compute_loss")
    assert all(loss[s] <= forward[s] + 1e-5 for s in forward), (loss, forward)


def test_the_server_derives_the_step_timings_from_them(
        run: tuple[Catalog, list[dict[str, Any]], list[Event]]) -> None:
    """`timing_<op>_total`: the slower rank's time (one span of each op per rank and step)."""
    catalog, _, rows = run
    for op in ("train_step", "train_step/forward", "train_step/backward", "optimizer_step"):
        derived = catalog.values("timeline", f"timing_{op}_total")
        spans: dict[int, float] = defaultdict(float)
        for r in by(rows, op):
            spans[r["step"]] = max(spans[r["step"]], r["end"] - r["start"])
        assert derived.keys() == spans.keys()
        assert all(derived[s] == pytest.approx(spans[s], abs=1e-5) for s in spans), op
    assert set(catalog.values("timeline", "timing_microbatch_count").values()) == {1}
    # every step has an inference window: (the previous save_batch, or training_loop_start,
    # its own save_batch]
    generation = catalog.values("timeline", "timing_generation_all_pct")
    assert sorted(generation) == list(range(1, STEPS + 1))
    assert all(0 < v <= 100 for v in generation.values()), generation


class TinyTrainer:
    """What TRL's profiling reads of a trainer (state, args, accelerator, model), and two
    blocks as TRL's trainers profile them: a decorated method, and a `profiling_context`
    block looked up in grpo_trainer's module (as `_generate_single_turn` does)."""

    def __init__(self, step: int) -> None:
        self.state = SimpleNamespace(global_step=step)
        self.args = SimpleNamespace(report_to=[])
        self.accelerator = SimpleNamespace(is_main_process=True)
        self.model = SimpleNamespace(training=True)

    def sync_weights(self) -> None:
        from trl.trainer import grpo_trainer

        with grpo_trainer.profiling_context(self, "sync_weights"):
            pass


def test_trl_weight_sync_blocks_are_weight_broadcasts() -> None:
    from trl.extras import profiling

    from trainer_hooks.integrations.hf_timeline import TrainerEvents, install

    class Older(TinyTrainer):  # TRL before sync_weights: a decorated _move_model_to_vllm
        @profiling.profiling_decorator
        def _move_model_to_vllm(self) -> None:
            pass

    plain = Older(step=2)
    assert isinstance(profiling.profiling_context(plain, "x"), profiling.ProfilingContext)
    trainer, recorder = Older(step=4), TrainerEvents(rank=1)
    install(trainer, recorder)
    install(trainer, recorder)  # twice: still one span per block
    trainer.sync_weights()
    trainer._move_model_to_vllm()
    plain.sync_weights()  # a trainer without a Timeline: TRL's block alone
    events = recorder.take()
    assert events["name"] == ["weight_broadcast", "weight_broadcast"]
    assert events["source"] == ["trainer", "trainer"] and events["rank"] == [1, 1]
    assert events["step"] == [4, 4]  # the policy step whose weights are moved
    assert all(s <= e for s, e in zip(events["start"], events["end"], strict=True))
    assert set(recorder.take_profiling()) == {"profiling/sync_weights",
                                              "profiling/_move_model_to_vllm"}


def test_without_spans_only_the_profiling_timers_are_kept() -> None:
    from trainer_hooks.integrations.hf_timeline import TrainerEvents, install

    trainer, recorder = TinyTrainer(step=0), TrainerEvents(spans=False)
    install(trainer, recorder)
    recorder.loop_start()
    trainer.sync_weights()
    assert recorder.take()["name"] == []
    assert list(recorder.take_profiling()) == ["profiling/sync_weights"]

