"""A group of frames finds and locks a run once for its step and samples messages
(ingest.write.runs.locked_runs): the next ones reuse the row object, which is the row, since
they write back what they change of it; a message undone in its savepoint, or any other kind
of message, makes the next one read the row again."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from ingest.models import Project, Run
from ingest.write import runs, store
from ingest.write.frames import handle_frames
from tests.server.conftest import samples_msg, step_msg
from trainer_hooks.wire import protocol as p

pytestmark = pytest.mark.django_db(transaction=True)
INC = "inc-1"


def _frame(obj: Any) -> tuple[bytes | str, bool]:
    return orjson.dumps(obj), False


def _step(step: int, **kw: Any) -> dict[str, Any]:
    return {**step_msg(step, {"loss": float(step)}, mid=f"st{step}"), "incarnation": INC, **kw}


def _samples(step: int) -> dict[str, Any]:
    return {**samples_msg(step, [1.0, 0.0], mid=f"sa{step}"), "incarnation": INC}


@pytest.fixture
def started() -> int:
    pid = Project.objects.create(name="p").pk
    start = {"v": 1, "id": "start", "type": "run.start", "run": "r", "incarnation": INC}
    [[ack]] = [outcomes for outcomes, _ in handle_frames(pid, [_frame(start)])]
    assert ack.reply["type"] == "ack"
    return pid


@pytest.fixture
def locks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    taken: list[int] = []
    real = runs.lock_run  # type: ignore[attr-defined]  # (imported there from core.commit)

    def counted(pk: int) -> Any:
        taken.append(pk)
        return real(pk)

    monkeypatch.setattr(runs, "lock_run", counted)
    return taken


def _row() -> tuple[Any, ...]:
    r = Run.objects.get()
    return r.seq, r.first_step, r.last_step, r.status


def test_a_groups_step_and_samples_messages_lock_their_run_once(started: int,
                                                                locks: list[int]) -> None:
    group = [_frame(_step(0)), _frame(_samples(0)),
             _frame([_step(1), _step(2), _step(3), _step(4)]),  # written together (bulk)
             _frame(_samples(3)), _frame(_step(5))]
    replies = [o.reply["type"] for outcomes, _ in handle_frames(started, group)
               for o in outcomes]
    assert replies == ["ack"] * 8
    assert len(locks) == 1
    assert _row() == (3, 0, 5, "running")  # three writes of points: step 0, 1-4, 5
    seq = Run.objects.get().seq
    # the same messages, a group each (every one locks afresh), leave the same row
    Run.objects.all().delete()
    locks.clear()
    pid = Project.objects.get().pk
    start = {"v": 1, "id": "start2", "type": "run.start", "run": "r", "incarnation": INC}
    handle_frames(pid, [_frame(start)])
    for f in group:
        handle_frames(pid, [f])
    assert len(locks) == 1 + len(group) and Run.objects.get().seq == seq


def test_a_message_undone_in_the_group_leaves_nothing_in_the_run_row(
        started: int, locks: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    apply = store._apply_samples

    def fails_late(w: Any, msg: Any, prepared: Any) -> None:
        apply(w, msg, prepared)  # it saw its step (the row object's last_step moved) ...
        if msg.id == "sa99":
            raise p.ProtocolError("invalid", "completion", "bad text")  # ... then undone

    monkeypatch.setattr(store, "_apply_samples", fails_late)
    group = [_frame(_step(1)), _frame(_samples(99)), _frame(_step(2))]
    replies = [o.reply for outcomes, _ in handle_frames(started, group) for o in outcomes]
    assert [r["type"] for r in replies] == ["ack", "error", "ack"]
    assert len(locks) == 2  # read again after the undone message
    assert _row()[1:] == (1, 2, "running")  # not 99


def test_another_kind_of_message_makes_the_next_read_the_row_again(
        started: int, locks: list[int]) -> None:
    end = {"v": 1, "id": "end", "type": "run.end", "run": "r", "incarnation": INC,
           "status": "finished"}
    group = [_frame(_step(1)), _frame(end), _frame(_step(2)), _frame(_step(3))]
    results = handle_frames(started, group)
    assert [o.reply["type"] for outcomes, _ in results for o in outcomes] == ["ack"] * 4
    assert len(locks) == 3  # step 1; the run.end; step 2 afresh (step 3 reuses it)
    assert _row()[1:] == (1, 3, "finished")
