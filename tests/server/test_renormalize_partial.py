"""An observed range's widening recomputes only the normalized family of the earlier steps
(their samples did not change; `StepState.norm_only`), and what it leaves is exactly what a
full re-aggregation gives: a full pass afterwards finds nothing to write."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from ingest.core import renormalize
from ingest.core.series_ids import series_id
from ingest.models import Project, Run, StepState
from ingest.pipeline import aggregate, materialize
from ingest.reads import catalog as reads
from ingest.write.frames import handle_object
from tests.server.conftest import samples_msg

pytestmark = pytest.mark.django_db(transaction=True)

NORM_MEAN = series_id("reward", "reward", "norm:mean")
MEAN = series_id("reward", "reward", "mean")


def send(project: int, msg: dict[str, Any]) -> None:
    assert handle_object(project, msg).reply["type"] == "ack"


def series(run_id: int, sid: str) -> dict[int, float]:
    got = reads.series(run_id, [sid], 10_000, None, None)["series"][sid]
    return dict(zip(got["step"], got["value"], strict=True))


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How many steps each kind of pass aggregated."""
    calls = {"full": 0, "norm_only": 0}
    full, norm = aggregate.aggregate_steps, aggregate.normalized_steps

    def count_full(s: Any, *args: Any) -> Any:
        calls["full"] += s.n_steps
        return full(s, *args)

    def count_norm(s: Any, *args: Any) -> Any:
        calls["norm_only"] += s.n_steps
        return norm(s, *args)

    monkeypatch.setattr(aggregate, "aggregate_steps", count_full)
    monkeypatch.setattr(aggregate, "normalized_steps", count_norm)
    return calls


def test_a_widening_recomputes_only_the_normalized_family_and_exactly(
        counted: dict[str, int]) -> None:
    project = Project.objects.create(name="p").pk
    rng = np.random.default_rng(1)
    rewards = {step: rng.random(8).round(3).tolist() for step in range(10)}
    for step, r in rewards.items():
        send(project, samples_msg(step, r, mid=f"m{step}", env="e", groups=[0] * 4 + [1] * 4,
                                  metrics={"len": [float(x) for x in range(8)]}))
    run_id = Run.objects.get().pk
    materialize.materialize_all(run_id)
    assert counted == {"full": 10, "norm_only": 0}
    # Step 10 widens the observed reward range to [min, 5]: aggregated alone first, then the
    # scheduled re-normalization of every step computes the normalized family only.
    rewards[10] = [5.0, 0.5, 0.25, 0.0]
    send(project, samples_msg(10, rewards[10], mid="m10", env="e", groups=[0, 0, 1, 1]))
    materialize.materialize(run_id)
    assert Run.objects.get().renormalize_at is not None
    raw_before = series(run_id, MEAN)
    materialize.materialize_all(run_id)  # applies the schedule now
    assert counted == {"full": 11, "norm_only": 11}
    assert not StepState.objects.filter(run_id=run_id, norm_only=True).exists()
    lo = min(min(r) for r in rewards.values())
    want = {s: float(np.mean((np.array(r) - lo) / (5.0 - lo))) for s, r in rewards.items()}
    got = series(run_id, NORM_MEAN)
    assert got.keys() == want.keys()
    assert all(got[s] == pytest.approx(want[s], rel=1e-12) for s in want)
    assert series(run_id, MEAN) == raw_before  # untouched, not withdrawn
    # A full re-aggregation of every step finds nothing left to write.
    renormalize.mark_all_dirty(run_id)
    outcomes = materialize.materialize_all(run_id)
    assert counted["full"] == 22
    assert sum(o.point_count() for o in outcomes) == 0, [o.live_points() for o in outcomes]


def test_new_samples_make_a_renormalized_step_whole_again(counted: dict[str, int]) -> None:
    project = Project.objects.create(name="p").pk
    for step in range(3):
        send(project, samples_msg(step, [0.0, 1.0], mid=f"m{step}", env="e"))
    run_id = Run.objects.get().pk
    materialize.materialize_all(run_id)
    renormalize.mark_all_renormalize(run_id)
    assert StepState.objects.filter(run_id=run_id, norm_only=True).count() == 3
    send(project, samples_msg(1, [0.5, 0.5], mid="late", env="e"))  # step 1 changed
    assert set(StepState.objects.filter(run_id=run_id, norm_only=True)
               .values_list("step", flat=True)) == {0, 2}
    renormalize.mark_all_renormalize(run_id)  # a second widening: step 1 stays whole
    assert not StepState.objects.get(run_id=run_id, step=1).norm_only
    counted.update(full=0, norm_only=0)
    materialize.materialize_all(run_id)
    assert counted == {"full": 3, "norm_only": 0}  # one pass: its steps are not all norm-only
    assert series(run_id, MEAN)[1] == pytest.approx(0.5)
