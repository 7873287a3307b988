"""A widened observed range re-normalizes earlier steps on a schedule (ingest.core.renormalize): at
most once per delay while ranges keep widening, at once for a barrier — never on every batch."""

from __future__ import annotations

import time
from typing import Any

import pytest
from channels.db import database_sync_to_async

from ingest.core import renormalize
from ingest.core.series_ids import series_id
from ingest.models import Run
from ingest.reads import catalog as reads
from tests.server.conftest import Trainer, samples_msg, settled

pytestmark = pytest.mark.django_db(transaction=True)

NORM_MEAN = series_id("reward", "reward", "norm:mean")


def state(run_name: str = "r") -> tuple[int, float | None]:
    run = Run.objects.get(name=run_name)
    return run.pk, run.renormalize_at


def norm_mean(run_id: int, step: int) -> float:
    got = reads.series(run_id, [NORM_MEAN], 1000, None, None)["series"][NORM_MEAN]
    return dict(zip(got["step"], got["value"], strict=True))[step]


async def send(trainer: Trainer, msg: dict[str, Any]) -> None:
    assert (await trainer.send(msg))["type"] == "ack"
    await settled()


async def test_a_widening_schedules_one_renormalization_and_a_barrier_applies_it(
        trainer: Trainer) -> None:
    # Undeclared environment: normalized by its observed range, here 0–1.
    await send(trainer, samples_msg(0, [0.0, 1.0], mid="a", env="e"))
    run_id, due = await database_sync_to_async(state)()
    assert due is None and await database_sync_to_async(norm_mean)(run_id, 0) == 0.5
    # Step 1 widens the range to 0–3: step 1 is aggregated with it; step 0 waits its turn.
    before = time.time()
    await send(trainer, samples_msg(1, [3.0, 3.0], mid="b", env="e"))
    _, due = await database_sync_to_async(state)()
    assert due is not None and before + renormalize.DELAY_SECONDS <= due
    assert await database_sync_to_async(reads.pending_steps)(run_id) == 0
    assert await database_sync_to_async(norm_mean)(run_id, 0) == 0.5  # not yet
    # More widenings meanwhile join the same schedule.
    await send(trainer, samples_msg(2, [-1.0, 0.0], mid="c", env="e"))
    assert (await database_sync_to_async(state)())[1] == due
    assert not await database_sync_to_async(renormalize.apply_due)()  # not due yet
    # A barrier makes the latest range's normalization readable at once.
    reply = await trainer.send({"v": 1, "id": "bar", "type": "barrier", "run": "r"})
    assert reply == {"type": "ack", "id": "bar"}
    assert (await database_sync_to_async(state)())[1] is None
    assert await database_sync_to_async(norm_mean)(run_id, 0) == pytest.approx(
        ((0.0 + 1) / 4 + (1.0 + 1) / 4) / 2)  # range −1–3


async def test_the_pipeline_applies_a_due_renormalization(trainer: Trainer) -> None:
    await send(trainer, samples_msg(0, [0.0, 1.0], mid="a", env="e"))
    await send(trainer, samples_msg(1, [2.0, 2.0], mid="b", env="e"))
    run_id, due = await database_sync_to_async(state)()
    assert due is not None
    await database_sync_to_async(
        lambda: Run.objects.filter(pk=run_id).update(renormalize_at=time.time() - 1))()
    assert await database_sync_to_async(renormalize.apply_due)() == [run_id]
    assert await database_sync_to_async(reads.pending_steps)(run_id) == 2  # every step


async def test_a_range_that_merely_creeps_waits_longer(trainer: Trainer) -> None:
    await send(trainer, samples_msg(0, [0.0, 1.0], mid="a", env="e"))
    before = time.time()
    await send(trainer, samples_msg(1, [1.001], mid="b", env="e"))  # 0.1% of the width
    run_id, due = await database_sync_to_async(state)()
    assert due is not None and before + renormalize.MINOR_DELAY_SECONDS <= due
    await send(trainer, samples_msg(2, [1.5], mid="c", env="e"))  # 50%: sooner
    _, sooner = await database_sync_to_async(state)()
    assert sooner is not None and sooner < before + renormalize.MINOR_DELAY_SECONDS
    assert sooner <= time.time() + renormalize.DELAY_SECONDS


async def test_a_barrier_leaves_a_creep_to_its_schedule_but_applies_a_significant_widening(
        trainer: Trainer) -> None:
    await send(trainer, samples_msg(0, [0.0, 1.0], mid="a", env="e"))
    await send(trainer, samples_msg(1, [1.001], mid="b", env="e"))  # creeps 0.1%
    run_id, due = await database_sync_to_async(state)()
    assert due is not None
    barrier = {"v": 1, "id": "bar1", "type": "barrier", "run": "r"}
    assert await trainer.send(barrier) == {"type": "ack", "id": "bar1"}
    # the creep's re-normalization keeps its schedule: step 0 still by the range 0–1
    assert (await database_sync_to_async(state)())[1] == due
    assert await database_sync_to_async(norm_mean)(run_id, 0) == 0.5
    await send(trainer, samples_msg(2, [2.0], mid="c", env="e"))  # grows ~100%
    assert await trainer.send({**barrier, "id": "bar2"}) == {"type": "ack", "id": "bar2"}
    assert (await database_sync_to_async(state)())[1] is None
    assert await database_sync_to_async(norm_mean)(run_id, 0) == pytest.approx(0.25)  # 0–2


async def test_creeps_that_add_up_to_a_significant_widening_are_applied_by_a_barrier(
        trainer: Trainer) -> None:
    await send(trainer, samples_msg(0, [0.0, 1.0], mid="a", env="e"))
    run_id, _ = await database_sync_to_async(state)()
    hi = 1.0
    for k in range(1, 5):  # each grows the range 0.5% (a creep), together ~2%
        hi *= 1.005
        await send(trainer, samples_msg(k, [hi], mid=f"c{k}", env="e"))
    _, due = await database_sync_to_async(state)()
    assert due is not None and due <= time.time() + renormalize.DELAY_SECONDS
    reply = await trainer.send({"v": 1, "id": "bar", "type": "barrier", "run": "r"})
    assert reply == {"type": "ack", "id": "bar"}
    assert (await database_sync_to_async(state)())[1] is None
    assert await database_sync_to_async(norm_mean)(run_id, 0) == pytest.approx((1 / hi) / 2)
    # the base moved with the re-normalization: one more creep is a creep again
    before = time.time()
    await send(trainer, samples_msg(5, [hi * 1.005], mid="c5", env="e"))
    _, due = await database_sync_to_async(state)()
    assert due is not None and before + renormalize.MINOR_DELAY_SECONDS <= due
