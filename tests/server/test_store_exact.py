"""Stored aggregates equal a float64 recomputation over all committed samples of the step,
whatever the split into messages, their order, duplicates or late arrival."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ingest.core import pointstore
from ingest.models import Project, Run, Series
from ingest.pipeline.materialize import materialize_all
from ingest.write.frames import handle_object
from tests.support.points import point_rows

pytestmark = pytest.mark.django_db(transaction=True)


def make_samples(rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
    return {
        "sample_id": np.array([f"s{i}" for i in range(n)]),
        "group_id": rng.integers(0, max(1, n // 4), n).astype(str),
        "reward": rng.normal(0.3, 1.0, n).round(3),
        "env": rng.choice(["a", "b"], n),
        "correct": rng.integers(0, 2, n).astype(float),
    }


def send(project: int, run: str, cols: dict[str, np.ndarray], idx: np.ndarray, mid: str,
         step: int = 0) -> None:
    msg = {"v": 1, "id": mid, "type": "samples", "run": run, "step": step,
           "sample_id": cols["sample_id"][idx].tolist(), "group_id": cols["group_id"][idx].tolist(),
           "reward": cols["reward"][idx].tolist(), "env": cols["env"][idx].tolist(),
           "metrics": {"correct": cols["correct"][idx].tolist()}}
    assert handle_object(project, msg).reply["type"] == "ack"


def stored(run: str, step: int = 0) -> dict[str, float]:
    materialize_all()
    return {r.sid: r.value for r in point_rows(name=run) if r.step == step}


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow,
          HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(2, 120), parts=st.integers(1, 6),
       dups=st.integers(0, 3))
def test_aggregates_do_not_depend_on_split_order_or_duplicates(
        transactional_db: None, seed: int, n: int, parts: int, dups: int) -> None:
    rng = np.random.default_rng(seed)
    project = Project.objects.get_or_create(name="p")[0].pk
    cols = make_samples(rng, n)
    whole, split = f"whole-{seed}-{n}", f"split-{seed}-{n}-{parts}"
    send(project, whole, cols, np.arange(n), "all")
    chunks = [c for c in np.array_split(rng.permutation(n), parts) if c.size]
    order = list(range(len(chunks))) + list(rng.integers(0, len(chunks), dups))
    for k in order:  # duplicates resend the same message id
        send(project, split, cols, chunks[k], f"part-{k}")

    a, b = stored(whole), stored(split)
    assert a == b  # bitwise: canonical order makes the split invisible

    r = cols["reward"]
    assert a["reward|reward|mean|"] == pytest.approx(np.mean(r), rel=1e-12, abs=1e-12)
    assert a["reward|reward|std|"] == pytest.approx(np.std(r, ddof=1), rel=1e-12)
    assert a["reward|reward|min|"] == r.min() and a["reward|reward|max|"] == r.max()
    assert a["reward|reward|count|"] == n
    for env in ("a", "b"):
        sel = cols["env"] == env
        if sel.any():
            assert a[f"sample|correct|mean|{env}"] == pytest.approx(
                np.mean(cols["correct"][sel]), rel=1e-12)


def test_late_samples_for_an_old_step_update_its_aggregates(transactional_db: None) -> None:
    project = Project.objects.create(name="p").pk
    rng = np.random.default_rng(7)
    cols = make_samples(rng, 40)
    send(project, "r", cols, np.arange(20), "early", step=3)
    send(project, "r", cols, np.arange(40), "other-step", step=9)
    before = stored("r", 3)["reward|reward|mean|"]
    send(project, "r", cols, np.arange(20, 40), "late", step=3)
    after = stored("r", 3)
    assert before == pytest.approx(np.mean(cols["reward"][:20]))
    assert after["reward|reward|mean|"] == pytest.approx(np.mean(cols["reward"]), rel=1e-12)
    assert after["reward|reward|count|"] == 40


def test_a_statistic_that_loses_its_value_is_withdrawn(transactional_db: None) -> None:
    project = Project.objects.create(name="p").pk
    base = {"v": 1, "type": "samples", "run": "r", "step": 0}
    handle_object(project, {**base, "id": "1", "sample_id": [1, 2], "group_id": [0, 0],
                            "reward": [0.0, 1.0]})
    assert "reward|reward|gini_mean|" in stored("r")
    # A reward below the undeclared minimum (0) takes the only group out of the Gini mean.
    handle_object(project, {**base, "id": "2", "sample_id": [3], "group_id": [0],
                            "reward": [-1.0]})
    assert "reward|reward|gini_mean|" not in stored("r")
    # Withdrawn by a tombstone (NaN) in the point store, which live pages replay as null.
    run = Run.objects.get(name="r")
    pk = Series.objects.get(run=run, sid="reward|reward|gini_mean|").pk
    changes = pointstore.changes(run.pk, 0, 10_000)
    assert changes is not None
    step, _, value = changes[0][pk]
    assert step.tolist() == [0] and np.isnan(value[0])


def test_integer_and_string_ids_name_the_same_group(transactional_db: None) -> None:
    project = Project.objects.create(name="p").pk
    base = {"v": 1, "type": "samples", "run": "r", "step": 0}
    handle_object(project, {**base, "id": "1", "sample_id": [1, 2], "group_id": [7, 7],
                            "reward": [0.0, 1.0]})
    handle_object(project, {**base, "id": "2", "sample_id": ["3"], "group_id": ["7"],
                            "reward": [1.0]})
    values = stored("r")
    assert values["groups|groups|count|"] == 1.0
    assert values["reward|reward|gini_mean|"] == pytest.approx(1 / 3)


def test_changed_ranges_reaggregate_the_families_that_use_them(transactional_db: None) -> None:
    project = Project.objects.create(name="p").pk
    handle_object(project, {"v": 1, "id": "s", "type": "samples", "run": "r", "step": 0,
                            "env": "e", "sample_id": [1, 2], "group_id": [0, 0],
                            "reward": [2.0, 2.0]})
    assert stored("r")["groups|groups|all_max|"] == 0.0  # undeclared max is 1
    ranges = {"v": 1, "id": "r1", "type": "ranges", "run": "r",
              "environments": [{"name": "e", "reward_min": 0.0, "reward_max": 2.0}]}
    assert handle_object(project, ranges).dirty
    after = stored("r")
    assert after["groups|groups|all_max|"] == 1.0
    assert after["ranges|reward|at_max_pct|e"] == 100.0
    # The same declaration again changes nothing and recomputes nothing.
    assert not handle_object(project, {**ranges, "id": "r2"}).dirty


@pytest.mark.parametrize("old_state", [False, True])
def test_a_steps_state_in_either_layout_is_diffed_exactly(transactional_db: None,
                                                          old_state: bool) -> None:
    """A step's aggregated series are kept as int32 pks (half the bytes); a state written as
    int64 (before that) is read the same: a re-aggregation then withdraws what vanished and
    writes only what changed."""
    from django.db import connection

    project = Project.objects.create(name="p").pk
    base = {"v": 1, "type": "samples", "run": "r", "step": 0}
    handle_object(project, {**base, "id": "1", "sample_id": [1, 2], "group_id": [0, 0],
                            "reward": [0.0, 1.0]})
    first = stored("r")
    run = Run.objects.get(name="r")
    with connection.cursor() as cur:
        cur.execute("SELECT derived_series, derived_values FROM ingest_stepstate"
                    " WHERE run_id = %s AND step = 0", [run.pk])
        pks, values = (bytes(x) for x in cur.fetchone())
        assert 2 * len(pks) == len(values) and len(values) == 8 * len(first)  # int32
        if old_state:
            wide = np.frombuffer(pks, dtype="<i4").astype("<i8").tobytes()
            cur.execute("UPDATE ingest_stepstate SET derived_series = %s WHERE run_id = %s"
                        " AND step = 0", [wide, run.pk])
    seq = pointstore.marks(run.pk).seq
    handle_object(project, {**base, "id": "2", "sample_id": [3], "group_id": [0],
                            "reward": [-1.0]})
    after = stored("r")
    assert "reward|reward|gini_mean|" not in after  # withdrawn (the old pks were understood)
    assert after["reward|reward|count|"] == 3
    changes = pointstore.changes(run.pk, seq, 10_000)
    assert changes is not None
    sid_of = dict(Series.objects.filter(run=run).values_list("pk", "sid"))
    written = {sid_of[pk] for pk in changes[0]}
    assert "reward|reward|gini_mean|" in written  # its tombstone
    unchanged = {sid for sid, v in first.items() if after.get(sid) == v}
    assert unchanged and not (written & unchanged), written & unchanged  # only what changed
