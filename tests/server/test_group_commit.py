"""Group commit: frames waiting on an ingest connection are applied in one transaction, each
still answered on its own, in order, after that commit; a bad message in the group writes
nothing and costs the others nothing."""

from __future__ import annotations

import time
from typing import Any

import orjson
import pytest
from django.db.backends.base.base import BaseDatabaseWrapper

from ingest.models import Project
from ingest.write import consumers
from ingest.write.frames import handle_frames
from tests.server.conftest import ingest_communicator, samples_msg, settled, step_msg
from tests.support.points import point_rows, values

pytestmark = pytest.mark.django_db(transaction=True)


def frame(obj: Any) -> tuple[bytes, bool]:
    return orjson.dumps(obj), False


def test_frames_commit_once_and_answer_each(monkeypatch: pytest.MonkeyPatch) -> None:
    pid = Project.objects.create(name="p").pk
    commits = []
    real = BaseDatabaseWrapper.commit
    monkeypatch.setattr(BaseDatabaseWrapper, "commit",
                        lambda self: (commits.append(1), real(self))[1])
    frames = [frame(step_msg(0, {"a": 1.0})),
              frame([step_msg(1, {"a": 2.0}), {**step_msg(2, {"a": 3.0}), "step": -1},
                     samples_msg(1, [1.0, 0.0])]),
              (b"\x00 not json", False),
              frame(step_msg(3, {"a": 4.0}))]
    results = handle_frames(pid, frames)
    assert len(commits) == 1
    assert [batch for _, batch in results] == [False, True, False, False]
    replies = [[o.reply for o in outcomes] for outcomes, _ in results]
    assert replies[0] == [{"type": "ack", "id": "step-0"}]
    assert replies[1][0] == {"type": "ack", "id": "step-1"}
    assert replies[1][1]["type"] == "error" and replies[1][1]["field"] == "step"
    assert replies[1][2] == {"type": "ack", "id": "s1"}
    assert replies[2][0]["type"] == "error"
    assert replies[3] == [{"type": "ack", "id": "step-3"}]
    assert values(point_rows(), key="a") == {0: 1.0, 1: 2.0, 3: 4.0}  # nothing of step "2"


async def test_waiting_frames_share_a_transaction_and_replies_keep_their_order(
        token: str, monkeypatch: pytest.MonkeyPatch) -> None:
    groups: list[int] = []
    real = handle_frames

    def slow_first(project_id: int, frames: list[tuple[Any, bool]]) -> Any:
        groups.append(len(frames))
        if len(groups) == 1:
            time.sleep(0.5)  # the rest of the frames arrive meanwhile and wait
        return real(project_id, frames)

    monkeypatch.setattr(consumers, "handle_frames", slow_first)
    comm = ingest_communicator(token)
    assert (await comm.connect())[0]
    for step in range(20):
        await comm.send_to(text_data=orjson.dumps(step_msg(step, {"a": float(step)})).decode())
    replies = [orjson.loads(await comm.receive_from(timeout=10)) for _ in range(20)]
    await comm.disconnect()
    await settled()
    assert replies == [{"type": "ack", "id": f"step-{s}"} for s in range(20)]
    assert groups[0] == 1 and max(groups) > 1 and sum(groups) == 20


async def test_a_group_holds_what_the_writers_pace_fits_in_its_time(
        token: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A group is bounded by the bytes the writer's thread applies in GROUP_SECONDS at its
    measured pace: at a pace of 50 KB per group, frames of ~14 KB go three at a time."""
    groups: list[int] = []
    real = handle_frames

    def slow_first(project_id: int, frames: list[tuple[Any, bool]]) -> Any:
        groups.append(sum(len(data) for data, _ in frames))
        if len(groups) == 1:
            time.sleep(0.5)
        return real(project_id, frames)

    monkeypatch.setattr(consumers, "handle_frames", slow_first)
    monkeypatch.setattr(consumers.Pace, "per_byte", consumers.GROUP_SECONDS / 50_000)
    comm = ingest_communicator(token)
    assert (await comm.connect())[0]
    payload = {f"k{i:04d}": float(i) for i in range(1000)}  # ~14 KB of JSON
    for step in range(12):
        await comm.send_to(text_data=orjson.dumps(step_msg(step, payload)).decode())
    replies = [orjson.loads(await comm.receive_from(timeout=30)) for _ in range(12)]
    await comm.disconnect()
    await settled()
    assert replies == [{"type": "ack", "id": f"step-{s}"} for s in range(12)]
    size = len(orjson.dumps(step_msg(0, payload)))
    assert 12_000 < size < 16_000
    assert max(groups) <= 50_000 and max(groups) >= 3 * size  # some held three, none four


def test_the_pace_counts_big_groups_only(monkeypatch: pytest.MonkeyPatch) -> None:
    pace = consumers.Pace
    monkeypatch.setattr(pace, "per_byte", consumers.GROUP_SECONDS / consumers.PACE_BYTES)
    assert pace.group_bytes() == consumers.PACE_BYTES
    pace.applied(10_000, 0.01)  # a small group: its fixed costs, not its bytes
    assert pace.group_bytes() == consumers.PACE_BYTES
    for _ in range(40):  # 1 MB in 4 ms: 5 MB would fit in 20 ms; the cap holds
        pace.applied(1_000_000, 0.004)
    assert pace.group_bytes() == consumers.GROUP_BYTES
    for _ in range(40):  # 1 MB in 40 ms: 0.5 MB fits
        pace.applied(1_000_000, 0.04)
    assert abs(pace.group_bytes() - 500_000) < 5_000
