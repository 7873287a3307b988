"""Step values that are not numbers: bools (0/1), strings (categorical keys), and values the
wire does not take (left out and reported, never the rest of the step)."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import orjson
import pytest
from channels.db import database_sync_to_async
from django.test import Client

from ingest.core.series_ids import series_id
from tests.server.conftest import Page, Trainer, step_msg

pytestmark = pytest.mark.django_db(transaction=True)

OUTCOME = series_id("step", "optim/update_outcome")


def read(path: str) -> Any:
    response = Client().get(path)
    assert response.status_code == 200, response.content
    return orjson.loads(response.content)


@database_sync_to_async
def catalog_and_series(*sids: str) -> tuple[dict[str, Any], dict[str, Any]]:
    [run] = read("/api/runs")["runs"]
    catalog = {s["id"]: s for s in read(f"/api/runs/{run['id']}/catalog")["series"]}
    ids = ",".join(quote(s, safe="") for s in sids)
    got = read(f"/api/runs/{run['id']}/series?ids={ids}")["series"]
    return catalog, got


async def test_strings_are_categorical_bools_are_numbers_and_bad_values_are_left_out(
        trainer: Trainer) -> None:
    outcomes = ["applied", "applied", "skipped", "applied"]
    for step, outcome in enumerate(outcomes):
        reply = await trainer.send(step_msg(step, {
            "loss": 1.0 / (step + 1), "optim/update_outcome": outcome,
            "optim/step_skipped": outcome == "skipped", "junk": [1, 2]}))
        assert reply["type"] == "ack"
        assert set(reply["left_out"]) == {"metrics.junk"}  # the rest of the step is stored
    # a number for the categorical key, a string for a numeric one: left out, named
    reply = await trainer.send(step_msg(9, {"optim/update_outcome": 3.0, "loss": "high",
                                            "optim/skip_reason": "nan_grad"}))
    assert set(reply["left_out"]) == {"metrics.optim/update_outcome", "metrics.loss"}
    skipped, loss, reason = (series_id("step", k) for k in
                             ("optim/step_skipped", "loss", "optim/skip_reason"))
    catalog, got = await catalog_and_series(OUTCOME, skipped, loss, reason)
    assert catalog[OUTCOME]["categorical"] is True and "categorical" not in catalog[loss]
    assert got[OUTCOME]["value"] == outcomes and got[OUTCOME]["step"] == [0, 1, 2, 3]
    assert got[reason]["value"] == ["nan_grad"]
    assert got[skipped]["value"] == [0.0, 0.0, 1.0, 0.0]
    assert got[loss]["step"] == [0, 1, 2, 3]
    assert series_id("step", "junk") not in catalog


async def test_live_pages_get_the_strings(trainer: Trainer, page: Page) -> None:
    await trainer.send(step_msg(0, {"optim/update_outcome": "applied"}))
    [run] = await database_sync_to_async(lambda: read("/api/runs")["runs"])()
    await page.send(type="subscribe", run=run["id"], after_seq=0)
    await trainer.send(step_msg(1, {"optim/update_outcome": "skipped"}))
    seen: dict[int, Any] = {}
    while 1 not in seen:
        delta = await page.recv_delta()
        points = delta["points"].get(OUTCOME)
        if points:
            seen.update(zip(points["step"], points["value"], strict=True))
    assert seen[1] == "skipped" and seen.get(0, "applied") == "applied"
