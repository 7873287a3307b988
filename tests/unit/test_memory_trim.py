"""ingest.write.memory: the memory frames held goes back to the system after a burst."""

from __future__ import annotations

import threading

from ingest.write.memory import Trimmer, _malloc_trim


def test_it_trims_once_enough_is_let_go_and_trims_a_bursts_tail_later() -> None:
    calls: list[int] = []
    trimmed = threading.Event()

    def trim(pad: int) -> int:
        calls.append(pad)
        trimmed.set()
        return 1

    t = Trimmer(trim, min_bytes=100, min_seconds=0.2)
    t.let_go(60)
    assert not trimmed.wait(0.3) and calls == []  # not enough yet
    t.let_go(60)
    assert trimmed.wait(5) and calls == [0]
    trimmed.clear()
    for _ in range(3):  # the tail of the burst: too soon for another trim, which comes later
        t.let_go(100)
    assert trimmed.wait(5)
    assert calls == [0, 0]


def test_glibcs_malloc_trim_is_found_here() -> None:
    # The machines this is developed and tested on run glibc: the trim is really called there.
    assert _malloc_trim() is not None
