"""Reward capture: RewardResult, tool metrics, the recorder's columns, environment declarations,
and the columnar sample batches the sender builds from log calls."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from trainer_hooks.rewards import (
    RewardRecorder,
    RewardResult,
    as_reward_result,
    merge_tool_metrics,
    results_to_columns,
    tool_metrics,
)
from trainer_hooks.rewards.ranges import environment_declarations
from trainer_hooks.transport.batching import SampleBatcher, build_fields
from trainer_hooks.transport.samples import SampleError, make_chunk
from trainer_hooks.wire import protocol as p


class FakeClient:
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def log_samples(self, step: Any, **kwargs: Any) -> None:
        self.calls.append({"step": step, **kwargs})


@dataclass
class Sample:
    id: str
    group_id: str
    step: int | None = None


# ---------------------------------------------------------------- results and tool metrics


def test_reward_results_are_accepted_in_the_shapes_frameworks_return() -> None:
    class Foreign:
        total_reward = 0.5
        sample_metrics = {"correct": 1.0}

    assert as_reward_result(RewardResult(1.0, {"a": 2.0})) == RewardResult(1.0, {"a": 2.0})
    assert as_reward_result(Foreign()) == RewardResult(0.5, {"correct": 1.0})
    assert as_reward_result({"total_reward": 2, "sample_metrics": None}) == RewardResult(2, {})
    assert as_reward_result((3.0, {"x": 1})) == RewardResult(3.0, {"x": 1})
    assert as_reward_result(np.float32(0.25)) == RewardResult(0.25, {})
    with pytest.raises(TypeError):
        as_reward_result("1.0")


def test_results_become_a_reward_column_and_the_union_of_metric_columns() -> None:
    rewards, metrics = results_to_columns(
        [RewardResult(1.0, {"a": 1.0}), RewardResult(0.0, {"b": 2.0}), 0.5])
    assert rewards == [1.0, 0.0, 0.5]
    assert metrics == {"a": [1.0, None, None], "b": [None, 2.0, None]}


def test_tool_metrics_follow_get_tool_metrics() -> None:
    got = tool_metrics({"add": 2, "subtract": 1, "multiply": 0}, errors=1)
    assert got == {"total_tool_calls": 3, "tool_success_count": 2, "tool_error_count": 1,
                   "tool_success_rate": pytest.approx(2 / 3), "unique_tools_used": 2,
                   "add_calls": 2, "subtract_calls": 1, "multiply_calls": 0}
    assert tool_metrics({})["tool_success_rate"] is None


def test_tool_metrics_merge_into_sample_metrics_without_overriding_the_environment() -> None:
    tools = {"total_tool_calls": 3, "tool_success_rate": 0.5, "add_calls": 3,
             "tools_used": ["add"], "note": "text"}
    merged = merge_tool_metrics(RewardResult(1.0, {"correct": 1.0, "add_calls": 9}), tools)
    assert merged == RewardResult(1.0, {"total_tool_calls": 3, "tool_success_rate": 0.5,
                                        "add_calls": 9, "correct": 1.0})
    assert merge_tool_metrics({"x": 1.0}, {"total_tool_calls": 2}) == {
        "total_tool_calls": 2, "x": 1.0}


# ---------------------------------------------------------------- recorder


def test_a_wrapped_compute_reward_records_every_result_with_its_identity() -> None:
    client = FakeClient()
    rec = RewardRecorder(client, env="countdown", step=7)

    class Env:
        @rec.capture
        def compute_reward(self, completion: str, sample: Sample) -> RewardResult:
            return RewardResult(float(len(completion)), {"words": len(completion.split())})

    env = Env()
    out = env.compute_reward("a b", Sample("s1", "g1"))
    assert out == RewardResult(3.0, {"words": 2})  # the caller gets the result unchanged
    env.compute_reward("abcd", Sample("s2", "g1", step=8))
    assert rec.annotate(["s1", "s2", "zz"], advantage=[0.5, -0.5, 1.0],
                        discard_reason=None) == 2
    assert rec.flush() == 2
    assert client.calls == [
        {"step": 7, "sample_id": ["s1"], "group_id": ["g1"], "reward": [3.0], "env": "countdown",
         "metrics": {"words": [2]}, "advantage": [0.5], "discard_reason": [None]},
        {"step": 8, "sample_id": ["s2"], "group_id": ["g1"], "reward": [4.0], "env": "countdown",
         "metrics": {"words": [1]}, "advantage": [-0.5], "discard_reason": [None]},
    ]
    assert rec.stats["annotate_missed"] == 1 and rec.pending == 0


async def test_an_async_compute_reward_with_a_context_and_tool_metrics() -> None:
    client = FakeClient()
    rec = RewardRecorder(client)

    def context(completion: str, state: dict[str, Any]) -> dict[str, Any]:
        return {"sample_id": state["id"], "group_id": state["group"], "step": 3,
                "env": "tools", "tool_metrics": state["tools"], "completion_tokens": 11}

    @rec.capture(context=context)
    async def compute_reward(completion: str, state: dict[str, Any]) -> RewardResult:
        return RewardResult(1.0, {"correct": 1.0})

    state = {"id": 5, "group": 0, "tools": tool_metrics({"add": 2}, errors=0)}
    assert await compute_reward("x", state) == RewardResult(1.0, {"correct": 1.0})
    rec.flush()
    [call] = client.calls
    assert call["sample_id"] == [5] and call["env"] == "tools"
    assert call["completion_tokens"] == [11]
    assert call["metrics"]["total_tool_calls"] == [2]
    assert call["metrics"]["add_calls"] == [2] and call["metrics"]["correct"] == [1.0]


def test_recording_problems_are_counted_never_raised(caplog: pytest.LogCaptureFixture) -> None:
    rec = RewardRecorder(FakeClient())

    @rec.capture
    def compute_reward(completion: str) -> float:  # no identity to find, no step
        return 1.0

    with caplog.at_level(logging.WARNING):
        assert compute_reward("x") == 1.0
        assert compute_reward("y") == 1.0
        assert rec.record(1.0, sample_id="a", group_id="g") == 1.0  # no step
        assert rec.record(object(), sample_id="a", group_id="g", step=1) is not None
        assert rec.annotate(["a"], bogus=[1]) == 0
    assert rec.stats["errors"] == 5 and rec.pending == 0
    assert sum("reward context failed" in r.message for r in caplog.records) == 1


def test_the_recorder_flushes_by_itself_when_full() -> None:
    client = FakeClient()
    rec = RewardRecorder(client, step=0, auto_flush=3)
    for i in range(7):
        rec.record(RewardResult(i, {}), sample_id=i, group_id=0)
    assert [len(c["reward"]) for c in client.calls] == [3, 3] and rec.pending == 1


# ---------------------------------------------------------------- environment declarations


class Countdown:
    name = "countdown"
    metrics_ranges = {"correct": {"min": 0.0, "max": 1.0},
                      "reasoning_steps": {"min": 0, "max": 20, "invert": True}}


class MathEnv:
    metrics_ranges = {"correct": {"min": 0, "max": 1}}
    reward_max = 1.0

    def compute_reward(self) -> None: ...


def test_yaml_and_environment_classes_merge_into_wire_declarations(tmp_path: Path) -> None:
    yaml_file = tmp_path / "envs.yaml"
    yaml_file.write_text(
        "environments:\n"
        "  - name: countdown\n    weight: 0.5\n    reward_min: 0.0\n    reward_max: 2.0\n"
        "    kwargs: {difficulty: hard}\n"
        "  - name: hendrycks_math\n    reward_min: 0\n    reward_max: 1\n")
    decls, problems = environment_declarations([str(yaml_file), Countdown, MathEnv()])
    assert problems == []
    assert decls == [
        {"name": "countdown", "weight": 0.5, "reward_min": 0.0, "reward_max": 2.0,
         "metrics_ranges": {"correct": {"min": 0.0, "max": 1.0, "invert": False},
                            "reasoning_steps": {"min": 0.0, "max": 20.0, "invert": True}}},
        {"name": "hendrycks_math", "weight": 1.0, "reward_min": 0.0, "reward_max": 1.0},
        {"name": "MathEnv", "weight": 1.0, "reward_max": 1.0,
         "metrics_ranges": {"correct": {"min": 0.0, "max": 1.0, "invert": False}}},
    ]
    p.parse_environments(decls, "environments")  # what the server will accept


def test_bad_declarations_are_left_out_with_a_reason(tmp_path: Path) -> None:
    decls, problems = environment_declarations([
        {"name": "ok", "reward_min": 0, "reward_max": 1},
        {"name": "inverted", "reward_min": 2, "reward_max": 1},
        {"reward_min": 0},
        str(tmp_path / "missing.yaml"),
    ])
    assert decls == [{"name": "ok", "weight": 1.0, "reward_min": 0.0, "reward_max": 1.0}]
    assert len(problems) == 3 and any("inverted" in p and "reward_max" in p for p in problems)


# ---------------------------------------------------------------- chunks and batches


def chunk(step: Any = 1, n: int = 4, **kw: Any) -> Any:
    args: dict[str, Any] = {
        "sample_id": [f"s{i}" for i in range(n)], "group_id": [i // 2 for i in range(n)],
        "reward": np.arange(n, dtype=float), "env": None, "metrics": None, "columns": {},
        "t": 100.0}
    args.update(kw)
    problems: list[str] = []
    c = make_chunk(step, args["sample_id"], args["group_id"], args["reward"], args["env"],
                   args["metrics"], args["columns"], args["t"], problems)
    return c, problems


def test_a_chunk_converts_columns_and_leaves_out_bad_optional_ones() -> None:
    c, problems = chunk(
        n=3, sample_id=np.array([1, 2, 3]), group_id="g", env=["a", "a", "a"],
        metrics={"ok": [1, None, 3], "bad name/": [1, 2, 3], "text": ["x", "y", "z"]},
        columns={"advantage": 0.0, "completion_tokens": [1, 2], "stop_reason": "length",
                 "colour": [1, 2, 3]})
    assert c.n == 3 and c.group_id == ["g"] * 3 and c.env == "a"
    # an integer array of ids stays one (int64, a copy): it travels as a typed array
    assert isinstance(c.sample_id, np.ndarray) and c.sample_id.dtype == np.int64
    assert c.sample_id.tolist() == [1, 2, 3]
    assert list(c.floats) == ["advantage"] and c.floats["advantage"].tolist() == [0.0] * 3
    assert c.strings == {"stop_reason": ["length"] * 3}
    assert list(c.metrics) == ["ok"] and np.isnan(c.metrics["ok"][1])
    assert len(problems) == 4  # completion_tokens length, colour, bad name, text


@pytest.mark.parametrize("kw", [
    {"reward": []}, {"reward": 1.0}, {"reward": ["a", "b"]},
    {"sample_id": [1, 2]}, {"sample_id": None}, {"group_id": [None] * 4},
    {"step": -1}, {"step": 1.5}, {"step": [1, 2]}, {"step": "3"},
    {"columns": {"discard_reason": ["lost"] * 4}}, {"sample_id": ["x" * 201] * 4},
    {"env": 5},
])
def test_a_chunk_with_unusable_required_columns_is_refused(kw: dict[str, Any]) -> None:
    with pytest.raises((SampleError, TypeError)):
        chunk(**kw)


def test_batches_merge_chunks_and_fill_absent_columns_with_nulls() -> None:
    a, _ = chunk(step=1, n=2, env="x", metrics={"m": [1, 2]}, columns={"advantage": [1, 1]})
    b, _ = chunk(step=2, n=3, env="y", columns={"stop_reason": ["stop", None, "length"]}, t=5.0)
    fields = build_fields([a, b]).fields
    msg = {"v": 1, "id": "m1", "type": "samples", "run": "r", **fields}
    got = p.validate_message(p.decode_frame(p.encode_msgpack(msg), binary=True))
    assert got.step.tolist() == [1, 1, 2, 2, 2]
    assert got.env.tolist() == ["x", "x", "y", "y", "y"]
    assert got.sample_id.tolist() == ["s0", "s1", "s0", "s1", "s2"]
    assert np.isnan(got.advantage[2:]).all() and got.advantage[:2].tolist() == [1, 1]
    assert got.stop_reason.tolist() == ["", "", "stop", "", "length"]
    assert got.time.tolist() == [100.0, 100.0, 5.0, 5.0, 5.0]
    assert np.isnan(got.metrics["m"][2:]).all()


def test_batches_respect_the_sample_and_byte_bounds() -> None:
    batcher = SampleBatcher(max_samples=10, max_bytes=1 << 20)
    sealed = []
    for _ in range(3):
        c, _ = chunk(n=4)
        sealed += batcher.add(c, now=0.0)
    big, _ = chunk(n=25)
    sealed += batcher.add(big, now=0.0)
    sealed.append(batcher.seal())
    assert [b.n for b in sealed] == [10, 10, 10, 7]
    assert [k for b in sealed for k in b.fields["sample_id"]][:12] == [
        "s0", "s1", "s2", "s3"] * 3

    c, _ = chunk(n=1000)
    per_sample = c.nbytes / 1000
    batcher = SampleBatcher(max_samples=4096, max_bytes=int(per_sample * 300))
    sealed = batcher.add(c, now=0.0) + [batcher.seal()]
    assert sum(b.n for b in sealed) == 1000 and len(sealed) == 4
    assert all(295 <= b.n <= 300 for b in sealed[:3])
    assert not batcher.due(1.0, 0.5)
    batcher.add(chunk(n=1)[0], now=1.0)
    assert not batcher.due(1.4, 0.5) and batcher.due(1.5, 0.5)


def test_batches_span_at_most_the_step_cap_and_the_server_refuses_more() -> None:
    cap = p.MAX_STEPS_PER_MESSAGE
    batcher = SampleBatcher(max_samples=100_000, max_bytes=1 << 30)
    steps = np.repeat(np.arange(2 * cap + 7), 2)  # one chunk over 2 × cap + 7 steps ...
    big, _ = chunk(step=steps.tolist(), n=steps.size)
    sealed = batcher.add(big, now=0.0)
    for s in range(3):  # ... then single-step chunks on top of the open batch
        sealed += batcher.add(chunk(step=10_000 + s, n=3)[0], now=0.0)
    sealed.append(batcher.seal())
    spans = [len(set(np.atleast_1d(b.fields["step"]).tolist())) for b in sealed]
    assert max(spans) == cap and sum(b.n for b in sealed) == steps.size + 9
    sent = [k for b in sealed for k in np.atleast_1d(b.fields["step"]).tolist()]
    assert sent == [*steps.tolist(), *np.repeat(10_000 + np.arange(3), 3).tolist()]
    def wire(fields: dict[str, Any]) -> Any:
        msg = {"v": 1, "id": "m", "type": "samples", "run": "r", **fields}
        return p.decode_frame(p.encode_msgpack(msg), binary=True)

    for b in sealed:  # every message the batcher makes is one the server takes
        p.validate_message(wire(b.fields))
    with pytest.raises(p.ProtocolError) as err:
        p.validate_message(wire(build_fields([big]).fields))
    assert err.value.field == "step" and f"at most {cap}" in err.value.message
