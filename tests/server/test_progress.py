"""A backlog of steps to (re-)aggregate — typically after a range change — reports its progress:
live pages get `progress` messages down to 0, the run API and the page carry `pending_steps`,
and `manage.py materialize` prints how far it got."""

from __future__ import annotations

import asyncio
import io
from typing import Any

import orjson
import pytest
from channels.db import database_sync_to_async
from django.core.management import call_command
from django.test import Client

from ingest.core.series_ids import series_id
from ingest.models import Run
from ingest.pipeline import materialize
from ingest.pipeline.materialize import materialize_all
from ingest.reads import catalog as reads
from ingest.write.store import replace_environments
from tests.server.conftest import Page, Trainer, samples_msg, settled
from trainer_hooks.wire.protocol import EnvironmentDecl

pytestmark = pytest.mark.django_db(transaction=True)

PASS = 32  # steps per pass here, so a small run makes a backlog of several passes
STEPS = 3 * PASS + 5


@pytest.fixture(autouse=True)
def small_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(materialize, "STEPS_PER_PASS", PASS)


def many_steps(run: str = "r") -> dict[str, Any]:
    """STEPS steps in one message, environment `countdown`; each step has two groups of four
    samples: one all at reward 1, one mixed."""
    steps = [s for s in range(STEPS) for _ in range(8)]
    groups = [2 * s + (i % 8 >= 4) for i, s in enumerate(steps)]
    rewards = [1.0 if i % 8 < 4 else float(i % 8 == 4) for i in range(len(steps))]
    return samples_msg(steps, rewards, run=run, mid="many", env="countdown", groups=groups)


async def subscribe(page: Page, run_id: int) -> int:
    """Subscribe from seq 0: the replay, then the run's backlog right now (returned)."""
    await page.send(type="subscribe", run=run_id, after_seq=0)
    assert (await page.recv())["type"] == "delta"
    msg = await page.recv()
    assert msg["type"] == "progress" and msg["run"] == run_id
    return int(msg["pending"])


async def progress_until_done(page: Page) -> list[int]:
    progress: list[int] = []
    while not progress or progress[-1] > 0:
        msg = await page.recv()
        if msg["type"] == "progress":
            progress.append(msg["pending"])
    return progress


RANGES = {"v": 1, "id": "ranges-1", "type": "ranges", "run": "r",
          "environments": [{"name": "countdown", "reward_min": 0.0, "reward_max": 2.0}]}


async def test_a_range_change_reports_progress_to_live_pages_down_to_zero(
        trainer: Trainer, page: Page) -> None:
    assert (await trainer.send(many_steps()))["type"] == "ack"
    await settled()
    run_id = await database_sync_to_async(lambda: Run.objects.get(name="r").pk)()
    assert await subscribe(page, run_id) == 0
    assert await all_max_groups(run_id) == {step: 1.0 for step in range(STEPS)}
    assert (await trainer.send(RANGES))["type"] == "ack"  # every step is dirty again
    progress = await progress_until_done(page)
    assert progress[0] > 0 and progress[-1] == 0
    assert progress == sorted(progress, reverse=True)
    assert progress[0] < STEPS  # reported after the first pass, with what is left
    await settled()
    # Against the declared reward_max of 2 no group is "all at max": every step was recomputed.
    assert await all_max_groups(run_id) == {step: 0.0 for step in range(STEPS)}


async def declare_elsewhere(run_id: int) -> None:
    """What `manage.py declare_ranges` does: the database changes, nobody tells this server."""
    run = await database_sync_to_async(Run.objects.get)(pk=run_id)
    envs = [EnvironmentDecl("countdown", reward_min=0.0, reward_max=2.0)]
    assert await database_sync_to_async(replace_environments)(run, envs)


@pytest.mark.parametrize("pipeline", [True, False])
async def test_steps_left_dirty_by_another_process_are_the_pipelines_work_not_the_pages(
        trainer: Trainer, page: Page, pipeline: bool) -> None:
    assert (await trainer.send(many_steps()))["type"] == "ack"
    await settled()
    run_id = await database_sync_to_async(lambda: Run.objects.get(name="r").pk)()
    assert await subscribe(page, run_id) == 0
    sweeping = asyncio.ensure_future(materialize.sweep_forever(0.2)) if pipeline else None
    try:
        await declare_elsewhere(run_id)
        if not pipeline:  # a watching page drives nothing: the steps wait for the pipeline
            assert await page.comm.receive_nothing(timeout=1.0)
            assert await database_sync_to_async(reads.pending_steps)(run_id) == STEPS
            return
        assert (await progress_until_done(page))[0] > 0
        await settled()
        assert await all_max_groups(run_id) == {step: 0.0 for step in range(STEPS)}
    finally:
        if sweeping is not None:
            sweeping.cancel()


async def test_a_page_that_subscribes_mid_backlog_learns_it(trainer: Trainer, page: Page
                                                           ) -> None:
    assert (await trainer.send(many_steps()))["type"] == "ack"
    await settled()
    run_id = await database_sync_to_async(lambda: Run.objects.get(name="r").pk)()
    await declare_elsewhere(run_id)
    assert await subscribe(page, run_id) == STEPS


@database_sync_to_async
def all_max_groups(run_id: int) -> dict[int, float]:
    sid = series_id("groups", "groups", "all_max", None)
    got = reads.series(run_id, [sid], 20_000, None, None)["series"][sid]
    return dict(zip(got["step"], got["value"], strict=True))


async def test_a_live_stream_without_backlog_sends_no_progress(trainer: Trainer,
                                                               page: Page) -> None:
    assert (await trainer.send(samples_msg(0, [1.0, 0.0])))["type"] == "ack"
    await settled()
    run_id = await database_sync_to_async(lambda: Run.objects.get(name="r").pk)()
    await page.send(type="subscribe", run=run_id, after_seq=0)
    await page.recv()
    assert (await trainer.send(samples_msg(1, [1.0, 0.5], mid="s2")))["type"] == "ack"
    await settled()
    msg = await page.recv_delta()
    assert msg["points"]
    assert await page.comm.receive_nothing(timeout=0.5)  # no progress message for one step


def test_the_run_api_and_the_page_carry_the_backlog(trainer_run: Run) -> None:
    client = Client()
    assert client.get(f"/api/runs/{trainer_run.pk}").json()["pending_steps"] == 0
    envs = [EnvironmentDecl("countdown", reward_min=0.0, reward_max=1.0)]
    assert replace_environments(trainer_run, envs)
    assert client.get(f"/api/runs/{trainer_run.pk}").json()["pending_steps"] == STEPS
    page = client.get(f"/runs/{trainer_run.pk}/metrics").content.decode()
    assert f'"pending_steps": {STEPS}' in page
    materialize_all(trainer_run.pk)
    assert client.get(f"/api/runs/{trainer_run.pk}").json()["pending_steps"] == 0


def test_the_materialize_command_prints_its_progress(trainer_run: Run) -> None:
    replace_environments(trainer_run, [EnvironmentDecl("countdown", reward_max=2.0)])
    out = io.StringIO()
    call_command("materialize", stdout=out)
    lines = out.getvalue().splitlines()
    assert lines[0] == f"run 'r' (id {trainer_run.pk}): {STEPS} step(s) to aggregate"
    assert lines[-2].startswith(f"run 'r' (id {trainer_run.pk}): done in ")
    assert lines[-1] == "1 run(s) materialized"
    assert reads.pending_steps(trainer_run.pk) == 0


@pytest.fixture
def trainer_run(token: str) -> Run:
    """Run `r` with STEPS materialized steps, ingested over HTTP."""
    barrier = {"v": 1, "id": "b", "type": "barrier", "run": "r"}  # answers once aggregated
    resp = Client().post("/api/ingest", orjson.dumps([many_steps(), barrier]),
                         content_type="application/json",
                         HTTP_AUTHORIZATION=f"Bearer {token}")
    assert resp.status_code == 200, resp.content
    return Run.objects.get(name="r")
