"""Distribution over time (GET /api/runs/<id>/distribution, ingest.reads.distribution): counts per
(step bucket, value bin) from the raw samples, equal to a float64 loop over what was sent —
kept samples, finite values, each environment or all, whatever the chunking of the read."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import orjson
import pytest
from django.test import Client

from ingest.models import Project, Run
from ingest.pipeline.materialize import materialize_all
from ingest.reads import distribution as dist
from ingest.write.frames import handle_object

pytestmark = pytest.mark.django_db(transaction=True)

STEPS = [0, 1, 2, 3, 4, 5, 6, 9, 10, 11]  # 7 and 8 have no samples
REASONS = [None] * 6 + ["max_async", "zero_advantage", "canceled"]


def samples(rng: np.random.Generator, step: Any, env: str | None, n: int, lo: float,
            hi: float, mid: str) -> dict[str, Any]:
    """One samples message: rewards in [lo, hi) with nulls, NaN and ±Inf, discards, a sample
    metric only from step 2 on, integer completion lengths with nulls."""
    reward: list[Any] = np.round(rng.uniform(lo, hi, n), 3).tolist()
    for i in rng.choice(n, 2, replace=False).tolist():
        reward[i] = [None, math.nan, math.inf, -math.inf][int(rng.integers(4))]
    discard = [REASONS[i] for i in rng.integers(len(REASONS), size=n).tolist()]
    tokens: list[Any] = rng.integers(10, 500, n).tolist()
    tokens[int(rng.integers(n))] = None
    msg: dict[str, Any] = {
        "v": 1, "id": mid, "type": "samples", "run": "r", "step": step,
        "sample_id": [f"{mid}-{i}" for i in range(n)],
        "group_id": [f"{mid}-g{i // 3}" for i in range(n)], "reward": reward,
        "discard_reason": discard, "completion_tokens": tokens}
    if env is not None:
        msg["env"] = env
    first = step if isinstance(step, int) else step[0]
    if first >= 2:
        score: list[Any] = rng.normal(0, 1, n).tolist()
        score[int(rng.integers(n))] = None
        msg["metrics"] = {"score": score}
    return msg


@pytest.fixture(autouse=True)
def _forget_recent() -> None:
    """Run ids of one test may come back in the next: start with no remembered payloads."""
    dist.RECENT.items.clear()


def ingest(project: int, msgs: list[dict[str, Any]], aggregate: bool = True) -> None:
    for msg in msgs:
        assert handle_object(project, msg).reply["type"] == "ack", msg
    if aggregate:
        materialize_all()


@pytest.fixture
def sent() -> list[dict[str, Any]]:
    """Two environments of different scales, a message split over two steps without an
    environment, a discarded sample far outside the kept ones' range."""
    rng = np.random.default_rng(7)
    msgs = []
    for step in STEPS:
        msgs.append(samples(rng, step, "a", 9, 0.0, 2.0, f"a{step}"))
        msgs.append(samples(rng, step, "b", 6, -1.0, 1.0, f"b{step}"))
    split = samples(rng, [3] * 4 + [9] * 4, None, 8, 0.0, 1.0, "split")
    split["discard_reason"] = [None] * 8
    msgs.append(split)
    far = samples(rng, 5, "a", 3, 0.0, 1.0, "far")
    far["reward"], far["discard_reason"] = [100.0, -100.0, 1.0], ["max_async", "canceled", None]
    msgs.append(far)
    return msgs


@pytest.fixture
def run_id(sent: list[dict[str, Any]]) -> int:
    project = Project.objects.create(name="proj").pk
    ingest(project, sent)
    return Run.objects.get().pk


def flat(msgs: list[dict[str, Any]], kind: str, key: str) -> list[tuple[int, str | None, Any,
                                                                        Any]]:
    """(step, env, value, discard reason) of every sample sent."""
    out = []
    for m in msgs:
        n = len(m["reward"])
        if kind == "reward":
            values = m["reward"]
        elif kind == "sample":
            values = m.get("metrics", {}).get(key, [None] * n)
        else:
            values = m[key]
        steps = m["step"] if isinstance(m["step"], list) else [m["step"]] * n
        out.extend((steps[i], m.get("env"), values[i], m["discard_reason"][i]) for i in range(n))
    return out


def oracle(msgs: list[dict[str, Any]], kind: str, key: str, env: str | None,
           edges: list[float], max_steps: int) -> tuple[list[list[int]], list[int], float,
                                                         float]:
    """Counts by a loop over every sample sent, in float64: (counts, bucket starts, min,
    max)."""
    rows = flat(msgs, kind, key)
    first = min(r[0] for r in rows)
    last = max(r[0] for r in rows)
    width = -(-(last - first + 1) // max_steps)
    n_buckets = -(-(last - first + 1) // width)
    counts = [[0] * (len(edges) - 1) for _ in range(n_buckets)]
    lo, hi = math.inf, -math.inf
    for step, e, v, reason in rows:
        if reason is not None or v is None or not math.isfinite(v):
            continue
        if env is not None and e != env:
            continue
        lo, hi = min(lo, v), max(hi, v)
        for i in range(len(edges) - 1):
            last_bin = i == len(edges) - 2
            if edges[i] <= v < edges[i + 1] or (last_bin and v == edges[i + 1]):
                counts[(step - first) // width][i] += 1
                break
        else:
            raise AssertionError(f"{v} is in no bin")
    return counts, [first + width * i for i in range(n_buckets)], lo, hi


def get(run_id: int, query: str, status: int = 200) -> dict[str, Any]:
    response = Client().get(f"/api/runs/{run_id}/distribution?{query}")
    assert response.status_code == status, response.content
    return orjson.loads(response.content)


def check_against_oracle(body: dict[str, Any], msgs: list[dict[str, Any]], kind: str,
                         key: str, env: str | None, max_steps: int) -> None:
    counts, starts, lo, hi = oracle(msgs, kind, key, env, body["bins"], max_steps)
    assert body["counts"] == counts
    assert body["steps"] == starts
    assert body["step_end"] == [min(s + body["step_width"] - 1, STEPS[-1]) for s in starts]
    assert body["total"] == sum(map(sum, counts)) > 0
    assert body["outside"] == 0
    assert (body["range"]["min"], body["range"]["max"]) == (lo, hi)


@pytest.mark.parametrize("chunk", [dist.STEPS_PER_CHUNK, 2])
@pytest.mark.parametrize("env", [None, "a", "b"])
def test_reward_counts_equal_a_loop_over_the_samples(run_id, sent, env, chunk, monkeypatch):
    monkeypatch.setattr(dist, "STEPS_PER_CHUNK", chunk)
    query = "kind=reward&key=reward&bins=7&max_steps=4" + (f"&env={env}" if env else "")
    body = get(run_id, query)
    check_against_oracle(body, sent, "reward", "reward", env, 4)
    assert body["step_width"] == 3 and len(body["counts"]) == 4
    assert len(body["bins"]) == 8 and not body["integer"]
    assert body["bins"][0] == body["range"]["min"] and body["bins"][-1] == body["range"]["max"]
    assert np.allclose(np.diff(body["bins"]), np.diff(body["bins"])[0])
    assert body["range"]["source"] == "observed"
    assert body["envs"] == ["a", "b"]
    assert (body["kind"], body["key"], body["env"]) == ("reward", "reward", env)


def test_a_chunk_is_bounded_by_samples_too(run_id, sent, monkeypatch):
    monkeypatch.setattr(dist, "SAMPLES_PER_CHUNK", 20)
    assert [j - i for i, j in dist.chunk_bounds(np.array([15, 15, 30, 5, 5, 5]))] == [
        1, 1, 1, 3]
    body = get(run_id, "kind=reward&key=reward&max_steps=5")
    check_against_oracle(body, sent, "reward", "reward", None, 5)


def test_empty_buckets_stay_in_the_grid(run_id, sent):
    body = get(run_id, "kind=reward&key=reward")  # 12 steps, one bucket each
    assert body["steps"] == list(range(12)) and body["step_width"] == 1
    assert [sum(body["counts"][s]) for s in (7, 8)] == [0, 0]
    check_against_oracle(body, sent, "reward", "reward", None, 300)


@pytest.mark.parametrize("env", [None, "b"])
def test_a_sample_metric_counts_only_its_kept_finite_values(run_id, sent, env):
    body = get(run_id, "kind=sample&key=score&bins=11" + (f"&env={env}" if env else ""))
    check_against_oracle(body, sent, "sample", "score", env, 300)
    assert sum(body["counts"][0]) == sum(body["counts"][1]) == 0  # logged from step 2 on


def test_completion_lengths_get_integer_aligned_bins(run_id, sent):
    body = get(run_id, "kind=rollouts&key=completion_tokens&bins=10&max_steps=4")
    check_against_oracle(body, sent, "rollouts", "completion_tokens", None, 4)
    lo, hi = body["range"]["min"], body["range"]["max"]
    width = -(-(hi - lo + 1) // 10)
    assert body["integer"] and body["range"]["source"] == "samples"
    assert body["bins"] == [lo - 0.5 + width * i for i in range(len(body["bins"]))]
    assert body["bins"][-2] <= hi < body["bins"][-1] and len(body["bins"]) <= 11


def test_samples_beyond_the_stored_extremes_are_counted_by_a_second_pass(run_id, sent):
    """The per-step min/max of completion lengths lag a batch not yet aggregated: the range
    comes from the samples read instead, and nothing is lost."""
    before = get(run_id, "kind=rollouts&key=completion_tokens")
    late = samples(np.random.default_rng(3), 11, "b", 4, 0.0, 1.0, "late")
    late["completion_tokens"], late["discard_reason"] = [5000, 1, 7, 8], [None] * 4
    ingest(Run.objects.get().project_id, [late], aggregate=False)
    body = get(run_id, "kind=rollouts&key=completion_tokens")
    assert body["total"] == before["total"] + 4  # a new batch is never served from memory
    check_against_oracle(body, [*sent, late], "rollouts", "completion_tokens", None, 300)
    assert (body["range"]["min"], body["range"]["max"]) == (1, 5000)


def test_lengths_before_any_aggregation_are_counted_from_the_samples_alone(sent):
    project = Project.objects.create(name="proj").pk
    ingest(project, sent, aggregate=False)
    body = get(Run.objects.get().pk, "kind=rollouts&key=completion_tokens&max_steps=5")
    check_against_oracle(body, sent, "rollouts", "completion_tokens", None, 5)


def test_whole_valued_rewards_get_one_bin_per_value(transactional_db):
    project = Project.objects.create(name="proj").pk
    ingest(project, [{"v": 1, "id": f"s{k}", "type": "samples", "run": "r", "step": k,
                      "sample_id": [1, 2, 3], "group_id": [0, 0, 0],
                      "reward": [0.0, 1.0, float(k % 2)]} for k in range(3)])
    body = get(Run.objects.get().pk, "kind=reward&key=reward")
    assert body["integer"] and body["bins"] == [-0.5, 0.5, 1.5]
    assert body["counts"] == [[2, 1], [1, 2], [2, 1]]


def test_bins_and_steps_are_clamped(run_id):
    reward = "kind=reward&key=reward"
    assert len(get(run_id, f"{reward}&bins=1")["bins"]) == dist.MIN_BINS + 1
    assert len(get(run_id, f"{reward}&bins=100000")["bins"]) == dist.MAX_BINS + 1
    assert len(get(run_id, f"{reward}&max_steps=0")["steps"]) == 1


def test_a_run_or_value_without_samples_is_empty(run_id, transactional_db):
    body = get(run_id, "kind=sample&key=never_logged")
    assert body["counts"] == [] and body["total"] == 0 and body["range"] is None
    assert body["envs"] == []
    assert get(run_id, "kind=reward&key=reward&env=nowhere")["envs"] == ["a", "b"]
    project = Run.objects.get().project_id
    ingest(project, [{"v": 1, "id": "x", "type": "step", "run": "steps-only", "step": 0,
                      "metrics": {"loss": 1.0}}])
    other = Run.objects.get(name="steps-only").pk
    assert get(other, "kind=reward&key=reward")["bins"] == []


@pytest.mark.parametrize(("query", "field"), [
    ("", "kind"),
    ("kind=advantage", "kind"),
    ("kind=reward", "key"),
    ("kind=sample", "key"),
    ("kind=reward&key=score", "key"),
    ("kind=rollouts", "key"),
    ("kind=rollouts&key=prompt_tokens", "key"),
    ("kind=reward&key=reward&bins=many", "bins"),
    ("kind=reward&key=reward&max_steps=1.5", "max_steps"),
])
def test_bad_requests_name_the_field(run_id, query, field):
    body = get(run_id, query, status=400)
    assert body["field"] == field and field in body["error"]


def test_an_unknown_run_is_404(transactional_db):
    assert get(4242, "kind=reward&key=reward", status=404)["error"] == "no run 4242"


def test_edges_and_counting_rules():
    assert dist.bin_edges(0.0, 1.0, 4, False).tolist() == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert dist.bin_edges(3.0, 3.0, 40, False).tolist() == [2.5, 3.5]
    # ten whole values in at most 4 bins: 3 values a bin, edges halfway between integers
    assert dist.bin_edges(0.0, 9.0, 4, True).tolist() == [-0.5, 2.5, 5.5, 8.5, 11.5]
    assert dist.bin_edges(0.0, 2.0, 40, True).tolist() == [-0.5, 0.5, 1.5, 2.5]
    edges = np.array([0.0, 0.5, 1.0])
    counts, outside = dist.count(np.array([0, 0, 1, 1, 2]), np.array([0.0, 0.5, 1.0, 1.5, 0.2]),
                                 edges, 2)
    assert counts.tolist() == [[1, 1], [0, 1]] and outside == 2
