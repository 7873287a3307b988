"""Which run a message reaches (ingest.write.runs), batch frames and the barrier, over the WebSocket
consumer of the full ASGI application."""

from __future__ import annotations

from typing import Any

import pytest
from channels.db import database_sync_to_async

from ingest.models import Run, SampleBatch
from tests.server.conftest import Trainer, samples_msg, step_msg
from tests.support.points import point_rows, values

pytestmark = pytest.mark.django_db(transaction=True)


def start(mid: str, inc: str | None = None, **extra: Any) -> dict[str, Any]:
    msg = {"v": 1, "id": mid, "type": "run.start", "run": "exp", **extra}
    return msg if inc is None else {**msg, "incarnation": inc}


@database_sync_to_async
def runs() -> dict[str, dict[str, Any]]:
    out = {}
    for r in Run.objects.order_by("id"):
        steps = sorted(values(point_rows(pk=r.pk), key="loss"))
        samples = sum(SampleBatch.objects.filter(run=r).values_list("n", flat=True))
        out[r.name] = {"id": r.pk, "wire": r.wire_name, "steps": steps, "samples": samples}
    return out


async def test_a_start_under_a_name_with_an_earlier_experiment_opens_a_new_run(
        trainer: Trainer) -> None:
    first = await trainer.send(start("a-0", "A"))
    assert first == {"type": "ack", "id": "a-0", "run_id": first["run_id"], "run_name": "exp",
                     "new_run": False}
    assert (await trainer.send(step_msg(0, {"loss": 1.0}, run="exp", mid="a-1",
                                        incarnation="A")))["type"] == "ack"
    second = await trainer.send(start("b-0", "B"))
    assert second["run_name"] == "exp-2" and second["new_run"] is True
    # B's messages and, later, A's (a replay, or a trainer still running) each reach their own
    await trainer.send(step_msg(0, {"loss": 2.0}, run="exp", mid="b-1", incarnation="B"))
    await trainer.send(step_msg(1, {"loss": 1.5}, run="exp", mid="a-2", incarnation="A"))
    # a message without incarnation (a joining worker, a raw client) follows the newest
    await trainer.send(step_msg(5, {"loss": 9.0}, run="exp", mid="raw"))
    assert await runs() == {
        "exp": {"id": first["run_id"], "wire": "exp", "steps": [0, 1], "samples": 0},
        "exp-2": {"id": second["run_id"], "wire": "exp", "steps": [0, 5], "samples": 0}}


async def test_resume_continues_and_a_resent_start_stays(trainer: Trainer) -> None:
    first = await trainer.send(start("s-0"))  # a raw client: no incarnation
    await trainer.send(step_msg(0, {"loss": 1.0}, run="exp"))
    again = await trainer.send(start("s-0"))  # its ack was lost: sent again, same id
    assert again["duplicate"] is True and again["run_id"] == first["run_id"]
    resumed = await trainer.send(start("s-1", "C", resume=True))
    assert resumed["run_id"] == first["run_id"] and resumed["new_run"] is False
    await trainer.send(step_msg(1, {"loss": 0.5}, run="exp", incarnation="C"))
    assert list(await runs()) == ["exp"]
    assert (await runs())["exp"]["steps"] == [0, 1]


async def test_a_start_adopts_a_run_that_only_workers_fed(trainer: Trainer) -> None:
    # a reward worker's samples arrived before the trainer's run.start
    assert (await trainer.send(samples_msg(0, [1.0, 0.0], run="exp", incarnation="W"))
            )["type"] == "ack"
    opened = await trainer.send(start("t-0", "T"))
    assert opened["run_name"] == "exp" and opened["new_run"] is False
    assert (await runs())["exp"]["samples"] == 2


async def test_a_batch_frame_gets_one_reply_per_message_in_order(trainer: Trainer) -> None:
    batch = [step_msg(s, {"loss": float(s)}, run="exp") for s in range(5)]
    batch[2] = step_msg(-1, {"loss": 1.0}, run="exp", mid="bad")
    batch.append({"v": 1, "id": "b", "type": "barrier", "run": "exp"})
    replies = await trainer.send(batch)
    assert [r["type"] for r in replies] == ["ack", "ack", "error", "ack", "ack", "ack"]
    assert [r["id"] for r in replies] == ["step-0", "step-1", "bad", "step-3", "step-4", "b"]
    assert replies[2]["field"] == "step"
    assert (await runs())["exp"]["steps"] == [0, 1, 3, 4]


async def test_a_barrier_is_acked_once_the_samples_before_it_are_readable(
        trainer: Trainer) -> None:
    for i in range(3):
        await trainer.send(samples_msg(i, [1.0, 0.0, 0.5], run="exp", mid=f"s{i}"))
    reply = await trainer.send({"v": 1, "id": "b", "type": "barrier", "run": "exp"})
    assert reply == {"type": "ack", "id": "b"}
    means = await database_sync_to_async(
        lambda: values(point_rows(), sid="reward|reward|mean|"))()
    assert means == {0: 0.5, 1: 0.5, 2: 0.5}
    unknown = await trainer.send({"v": 1, "id": "b2", "type": "barrier", "run": "nope"})
    assert unknown == {"type": "ack", "id": "b2"} and "nope" not in await runs()
