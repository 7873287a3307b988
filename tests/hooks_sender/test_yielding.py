"""The sender loop's lower switch interval while it is busy (`transport.engine.Yielding`):
lowered only within its busy spells, restored after them and after the client, a caller's
own interval kept, and the process's interval kept beside a trainer that holds the GIL."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from devtools.live_server import free_port
from trainer_hooks.transport import engine
from trainer_hooks.transport.client import connect
from trainer_hooks.transport.engine import YIELD_SECONDS, Yielding


@pytest.fixture(autouse=True)
def interval() -> Iterator[float]:
    before = sys.getswitchinterval()
    sys.setswitchinterval(0.005)
    yield 0.005
    sys.setswitchinterval(before)


def test_a_busy_spell_lowers_the_interval_and_restores_it() -> None:
    y = Yielding()
    y.enter()
    assert sys.getswitchinterval() == pytest.approx(YIELD_SECONDS)
    y.leave()
    assert sys.getswitchinterval() == 0.005
    y.leave()  # (idempotent)
    assert sys.getswitchinterval() == 0.005


def test_two_senders_restore_the_interval_only_when_both_are_idle() -> None:
    a, b = Yielding(), Yielding()
    a.enter()
    b.enter()
    a.leave()
    assert sys.getswitchinterval() == pytest.approx(YIELD_SECONDS)  # b is still busy
    b.leave()
    assert sys.getswitchinterval() == 0.005


def test_an_interval_set_during_a_spell_is_kept() -> None:
    y = Yielding()
    y.enter()
    sys.setswitchinterval(0.002)  # the program's own choice, meanwhile
    y.leave()
    assert sys.getswitchinterval() == 0.002


def test_a_lower_interval_of_the_process_is_left_alone() -> None:
    sys.setswitchinterval(0.00005)
    y = Yielding()
    y.enter()
    assert sys.getswitchinterval() == pytest.approx(0.00005)
    y.leave()
    assert sys.getswitchinterval() == pytest.approx(0.00005)


def test_spells_spent_waiting_for_the_gil_keep_the_process_interval(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Beside a trainer holding the GIL the sender's spells are mostly blocked: the next
    spells keep 5 ms (the sender would otherwise take the GIL back every 0.1 ms); once
    they run unblocked again, the lower interval comes back."""
    y = Yielding()
    clock = {"t": 0.0, "run": 0.0}
    monkeypatch.setattr(engine.time, "monotonic", lambda: clock["t"])
    monkeypatch.setattr(y, "schedstat", lambda: (clock["run"], 0.0))

    def spell(wall: float, run: float) -> None:
        y.enter()
        clock["t"] += wall
        clock["run"] += run
        y.leave()

    spell(0.02, 0.005)  # blocked 15 ms of 20
    y.enter()
    assert sys.getswitchinterval() == 0.005
    y.leave()
    spell(0.02, 0.018)
    y.enter()
    assert sys.getswitchinterval() == pytest.approx(YIELD_SECONDS)
    y.leave()


def test_a_client_leaves_the_process_interval_as_it_found_it(tmp_path: Path) -> None:
    client = connect(f"ws://127.0.0.1:{free_port()}", "tok", "run-1", backoff_max=0.2,
                     spool_dir=tmp_path / "spool")
    for step in range(50):
        client.log_step(step, {"loss": 1.0})
        client.log_samples(step, sample_id=list(range(64)), group_id=0,
                           reward=[0.5] * 64)
    assert client.sync(10)
    client.close(0.5)
    assert sys.getswitchinterval() == 0.005
