"""A samples message whose string columns (`env`, `stop_reason`, `discard_reason`) come
dictionary-encoded is stored and aggregated exactly as the same message with lists: the same
stored batches byte for byte, the same points, the same samples read back. Runs on SQLite and,
with DATABASE_URL, PostgreSQL."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from django.test import Client

from ingest.models import Project, Run, SampleBatch
from ingest.pipeline.materialize import materialize_all
from ingest.write.frames import handle_frames
from tests.support.points import point_rows
from trainer_hooks.wire import protocol as p

pytestmark = pytest.mark.django_db(transaction=True)

N = 300


def columns_of(seed: int) -> dict[str, list[Any]]:
    rng = np.random.default_rng(seed)
    return {
        "env": rng.choice(["math", "countdown", "code"], N).tolist(),
        "stop_reason": [None if x < 0.2 else "length" if x < 0.5 else "stop"
                        for x in rng.random(N)],
        "discard_reason": [None if x < 0.7 else "max_async" if x < 0.9 else "zero_advantage"
                           for x in rng.random(N)],
    }


def coded(rows: list[str | None], unused: str) -> dict[str, Any]:
    """The column dictionary-encoded, its values unsorted and one of them used by no row."""
    values = [unused, *sorted({r for r in rows if r is not None}, reverse=True)]
    return {"values": values,
            "codes": np.array([-1 if r is None else values.index(r) for r in rows])}


def message(run: str, mid: str, labels: dict[str, Any], seed: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed + 1)
    return {"v": 1, "id": mid, "type": "samples", "run": run,
            "step": np.repeat(np.arange(3), N // 3), "sample_id": np.arange(N),
            "group_id": np.arange(N) // 6, "reward": rng.normal(0.5, 1.0, N).round(3),
            "advantage": rng.normal(0.0, 1.0, N), "time": np.full(N, 1.7e9),
            "metrics": {"correct": rng.integers(0, 2, N).astype(float)}, **labels}


def send(project: int, msg: dict[str, Any]) -> None:
    [(outcomes, _)] = handle_frames(project, [(p.encode_msgpack(msg), True)])
    assert [o.reply["type"] for o in outcomes] == ["ack"], outcomes[0].reply


def stored(run: str) -> tuple[list[tuple[int, int, bytes]], dict[tuple[str, int], float]]:
    run_pk = Run.objects.get(name=run).pk
    batches = sorted((b.step, b.n, bytes(b.data)) for b in SampleBatch.objects.filter(run=run_pk))
    points = {(r.sid, r.step): r.value for r in point_rows(name=run)}
    return batches, points


@pytest.mark.parametrize("seed", [0, 1])
def test_coded_labels_are_stored_and_aggregated_as_lists(seed: int) -> None:
    project = Project.objects.create(name="p").pk
    labels = columns_of(seed)
    send(project, message("listed", "m", labels, seed))
    send(project, message("coded", "m", {k: coded(v, "canceled") for k, v in labels.items()}, seed))
    materialize_all()
    listed, coded_ = stored("listed"), stored("coded")
    assert listed[0] and listed[0] == coded_[0]  # the same bytes
    assert listed[1] and listed[1].keys() == coded_[1].keys()
    for key, value in listed[1].items():  # the same values, bit for bit (NaN as NaN)
        assert np.float64(value).tobytes() == np.float64(coded_[1][key]).tobytes(), key
    for run in ("listed", "coded"):
        pk = Run.objects.get(name=run).pk
        res = Client().get(f"/api/runs/{pk}/samples", {"step": "1", "env": "math"})
        assert res.status_code == 200
        if run == "listed":
            want = res.json()["samples"]
        else:
            assert res.json()["samples"] == want and want


def test_a_bad_coded_column_is_an_error_naming_it_and_stores_nothing() -> None:
    project = Project.objects.create(name="p").pk
    labels = {"env": {"values": ["math"], "codes": np.full(N, 1)}}
    [(outcomes, _)] = handle_frames(project, [(p.encode_msgpack(message("r", "m", labels, 0)),
                                               True)])
    [reply] = [o.reply for o in outcomes]
    assert (reply["type"], reply["code"], reply["field"]) == ("error", "invalid", "env.codes")
    assert reply["message"].startswith("env.codes[0] is 1; it must index env.values (0–0)")
    assert not SampleBatch.objects.exists()
