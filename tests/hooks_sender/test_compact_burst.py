"""A burst of `log_samples` calls — the sender thread more than COMPACT_BEHIND calls behind —
has its lists of numbers packed at the call (trainer_hooks.transport.client): the queue then
holds float64 arrays, not the caller's lists (whose Python floats a burst would otherwise hold
by the million), and the sender makes of an array exactly what it makes of the list; a call
while the sender keeps up is taken as it came, and a helper-process sender never packs here."""

from __future__ import annotations

import collections
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.hooks_sender.test_sender import ScriptedServer
from trainer_hooks.transport.client import COMPACT_BEHIND, _compacted_samples, connect
from trainer_hooks.transport.queue import SamplesCall
from trainer_hooks.transport.samples import make_chunk
from trainer_hooks.transport.sealer import Sealer

N = 32


def _columns(step: int) -> dict[str, Any]:
    rng = np.random.default_rng(step)
    return {"sample_id": list(range(step * N, (step + 1) * N)), "group_id": [0] * N,
            "reward": rng.normal(size=N).tolist(),
            "advantage": rng.integers(-3, 3, N).tolist(),  # ints: packed as floats too
            "metrics": {"len": rng.integers(1, 900, N).astype(float).tolist(),
                        "maybe": [None, *rng.normal(size=N - 1).tolist()]}}  # a null: as it is


def test_a_burst_is_packed_at_the_call_and_a_sender_that_keeps_up_takes_lists(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gate = threading.Event()
    pump = Sealer.pump_once

    def held(self: Sealer) -> Any:  # the sender thread takes nothing until the gate opens
        gate.wait(30)
        return pump(self)

    monkeypatch.setattr(Sealer, "pump_once", held)
    with ScriptedServer(lambda m, n: "ack") as server:
        c = connect(f"ws://127.0.0.1:{server.port}", "tok", "r", spool_dir=tmp_path)
        given = [_columns(step) for step in range(COMPACT_BEHIND + 8)]
        for step, cols in enumerate(given):
            c.log_samples(step, **cols)
        assert isinstance(c._queue, collections.deque)  # (the thread sender's)
        queued = list(c._queue)
        for position, entry in enumerate(queued):
            if not isinstance(entry, SamplesCall):
                continue  # (the run.start, queued first)
            cols = given[entry.step]
            assert entry.metrics is not None
            if position <= COMPACT_BEHIND:  # the sender was not that far behind: as given
                assert entry.reward is cols["reward"]
                assert entry.metrics["len"] is cols["metrics"]["len"]
            else:
                for got, want in [(entry.reward, cols["reward"]),
                                  (entry.advantage, cols["advantage"]),
                                  (entry.metrics["len"], cols["metrics"]["len"])]:
                    assert type(got) is np.ndarray and got.dtype == np.float64
                    assert got.tobytes() == np.array(want, dtype=np.float64).tobytes()
                assert entry.metrics["maybe"] is cols["metrics"]["maybe"]  # numpy decides
                assert entry.sample_id is cols["sample_id"]  # ids are not numbers to pack
        packed = sum(isinstance(e, SamplesCall) and type(e.reward) is np.ndarray
                     for e in queued)
        assert packed == len(given) - COMPACT_BEHIND
        gate.set()
        assert c.close(timeout=30)  # everything stored (acknowledged)
        assert c.stats["logged_samples"] == N * len(given) and c.stats["invalid_calls"] == 0
        assert c.stats["rejected"] == 0 and any(m["type"] == "samples" for m in server.received)


@pytest.mark.parametrize("values", [
    [0.5, -0.0, float("nan"), float("inf"), 1e308, 3],  # floats, then an int
    [1, 2, 2**53 + 1, -7],  # ints (beyond 2**53: float64 rounds them, as the sender does)
    [True, 1.0],  # a bool first: not packed here (the sender's rules decide)
    [np.float64(0.25), 1.0],  # numpy scalars: not packed here either
    [1.0, "2.0"], [1.0, None], [2**70, 1.0], [],  # not numbers struct packs: as they are
])
def test_packing_changes_nothing_the_sender_makes(values: list[Any]) -> None:
    n = len(values) or 1
    call = SamplesCall(0, list(range(n)), [0] * n, values or [1.0], None,
                       {"m": list(values) or [2.0]}, list(values) or None, None, None, None,
                       None, None, None, None, 1.0)
    compact = _compacted_samples(call)

    def chunk(c: SamplesCall) -> Any:
        problems: list[str] = []
        try:
            got = make_chunk(c.step, c.sample_id, c.group_id, c.reward, c.env, c.metrics,
                             {"advantage": c.advantage}, c.time, problems)
        except Exception as exc:  # noqa: BLE001 - a refused call must be refused the same
            return ("refused", str(exc))
        return (got.reward.tobytes(), {k: v.tobytes() for k, v in got.metrics.items()},
                {k: v.tobytes() for k, v in got.floats.items()}, problems)

    assert chunk(compact) == chunk(call)


def test_a_helper_process_sender_never_packs_on_the_callers_thread(tmp_path: Path) -> None:
    with ScriptedServer(lambda m, n: "ack") as server:
        c = connect(f"ws://127.0.0.1:{server.port}", "tok", "r", spool_dir=tmp_path,
                    sender="process")
        try:
            assert c._compact_behind == float("inf")
        finally:
            assert c.close(timeout=60)
