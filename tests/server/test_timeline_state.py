"""The run's `TimelineState` as events and gauges messages keep it (ingest.write.events): its
extent, counts, version and the lanes, servers and ranks the Performance buckets divide by,
over several messages, on every backend."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from django.test import Client

from ingest.models import Run, TimelineState

pytestmark = pytest.mark.django_db(transaction=True)


def post(token: str, *messages: dict[str, Any]) -> list[dict[str, Any]]:
    reply = Client().post("/api/ingest", orjson.dumps(list(messages)),
                          content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert reply.status_code == 200, reply.content
    acks: list[dict[str, Any]] = reply.json()["acks"]
    return acks


def events(mid: str, **columns: Any) -> dict[str, Any]:
    return {"v": 1, "id": mid, "type": "events", "run": "r", **columns}


def test_the_state_adds_up_over_messages(token: str) -> None:
    post(token, events("e1", name=["generation", "generation", "forward"],
                       start=[100.0, 101.0, 102.0], end=[103.0, 104.0, 102.5],
                       source=["inference", "inference", "trainer"], server=["s1", "s1", None],
                       slot=[1, 0, None], rank=[None, None, 1]))
    state = TimelineState.objects.get(run=Run.objects.get(name="r"))
    assert (state.version, state.events, state.first, state.last) == (1, 3, 100.0, 104.0)
    assert (state.lanes, state.servers, state.ranks) == ([["s1", 0], ["s1", 1]], ["s1"], [1])
    # a second message: earlier and later times, a new lane, server and rank, one lane again
    post(token, events("e2", name={"values": ["generation", "weight_sync", "forward"],
                                   "codes": [0, 1, 2, 0]},
                       start=[90.0, 95.0, 96.0, 97.0], end=[91.0, 96.0, 110.0, 98.0],
                       source={"values": ["inference", "trainer"], "codes": [0, 1, 1, 0]},
                       server=[2, 3, None, "s1"], slot=[0, None, None, 1], rank=[None, None, 0,
                                                                                 None]))
    state.refresh_from_db()
    assert (state.version, state.events, state.first, state.last) == (2, 7, 90.0, 110.0)
    # (in the stable order of their JSON texts)
    assert state.lanes == [["s1", 0], ["s1", 1], [2, 0]]
    assert state.servers == ["s1", 2, 3]
    assert state.ranks == [0, 1, None]  # the weight_sync: a trainer span of no rank
    post(token, {"v": 1, "id": "g1", "type": "gauges", "run": "r", "time": [50.0, 200.0],
                 "name": "gpu/util_pct", "value": [1, 2]},
         {"v": 1, "id": "g2", "type": "gauges", "run": "r", "time": 120.0,
          "name": "gpu/util_pct", "value": 3})
    state.refresh_from_db()
    assert (state.gauges, state.gauge_first, state.gauge_last) == (3, 50.0, 200.0)
    assert (state.version, state.events, state.lanes) == (2, 7, [["s1", 0], ["s1", 1], [2, 0]])
