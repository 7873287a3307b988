"""Timeline with a fake clock and a fake device-event backend."""

from __future__ import annotations

from typing import Any

import pytest

from trainer_hooks.metrics.timing import TIMELINE_OPS, Timeline


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def test_totals_microbatch_means_and_step_keys() -> None:
    clock = FakeClock()
    tl = Timeline(clock=clock)
    tl.start_step()
    with tl.region("waiting_for_data"):
        clock.advance(2.0)
    with tl.region("data_to_device"):
        clock.advance(0.5)
    for forward, backward in ((1.0, 3.0), (2.0, 5.0)):
        with tl.microbatch():
            with tl.region("forward"):
                clock.advance(forward)
                with tl.region("compute_entropy"):  # nested inside forward, counted on its own
                    clock.advance(0.25)
            with tl.region("backward"):
                clock.advance(backward)
    clock.advance(0.75)  # untimed work still counts toward the step
    got = tl.step_metrics()
    assert got == {
        "timing_step_total": 14.75,
        "timing_step_active": 12.75,
        "timing_waiting_for_data": 2.0,
        "timing_data_to_device_total": 0.5,
        "timing_forward_total": 3.5,
        "timing_compute_entropy_total": 0.5,
        "timing_backward_total": 8.0,
        "timing_forward_microbatch_mean": 1.75,
        "timing_compute_entropy_microbatch_mean": 0.25,
        "timing_backward_microbatch_mean": 4.0,
    }


def test_microbatch_mean_is_over_the_microbatches_that_ran_the_op() -> None:
    clock = FakeClock()
    tl = Timeline(clock=clock)
    for index in range(4):
        with tl.microbatch():
            with tl.region("forward"):
                clock.advance(1.0)
            if index == 3:
                with tl.region("compute_kl"):
                    clock.advance(0.4)
                with tl.region("compute_kl"):  # twice in one microbatch: summed
                    clock.advance(0.2)
    got = tl.step_metrics()
    assert got["timing_forward_microbatch_mean"] == 1.0
    assert got["timing_compute_kl_microbatch_mean"] == pytest.approx(0.6)


def test_the_next_step_starts_when_metrics_are_taken() -> None:
    clock = FakeClock()
    tl = Timeline(clock=clock)
    with tl.region("forward"):
        clock.advance(1.0)
    tl.step_metrics()
    clock.advance(3.0)
    with tl.region("weight_sync_trainer"):
        clock.advance(1.0)
    got = tl.step_metrics()
    assert got == {
        "timing_step_total": 4.0,
        "timing_step_active": 4.0,
        "timing_waiting_for_data": 0.0,
        "timing_weight_sync_trainer_total": 1.0,
    }


def test_misuse_is_reported() -> None:
    tl = Timeline(clock=FakeClock())
    with pytest.raises(ValueError, match="lower_snake_case"):
        with tl.region("Forward pass"):
            pass
    with tl.region("forward"):
        with pytest.raises(ValueError, match="already open"):
            with tl.region("forward"):
                pass
        with pytest.raises(RuntimeError, match="open regions"):
            tl.step_metrics()
    with tl.microbatch():
        with pytest.raises(ValueError, match="do not nest"):
            with tl.microbatch():
                pass


class FakeEvents:
    """Device events whose timestamps come from a separate 'GPU' clock; counts syncs."""

    def __init__(self, gpu: FakeClock) -> None:
        self.gpu = gpu
        self.syncs = 0
        self.pending: list[dict[str, Any]] = []

    def record(self) -> dict[str, Any]:
        event = {"t": self.gpu.now, "done": False}
        self.pending.append(event)
        return event

    def synchronize(self) -> None:
        self.syncs += 1
        for event in self.pending:
            event["done"] = True

    def elapsed(self, start: dict[str, Any], end: dict[str, Any]) -> float:
        assert start["done"] and end["done"], "elapsed() read before synchronize()"
        return float(end["t"] - start["t"])


def test_device_events_sync_once_per_step_and_waiting_uses_the_cpu_clock() -> None:
    cpu, gpu = FakeClock(), FakeClock()
    events = FakeEvents(gpu)
    tl = Timeline(clock=cpu, events=events)
    with tl.region("waiting_for_data"):
        cpu.advance(2.0)  # the GPU is idle: only the CPU clock moves
    for _ in range(3):
        with tl.microbatch():
            with tl.region("forward"):
                gpu.advance(0.5)
                cpu.advance(0.01)  # launching kernels is cheap on the host
    cpu.advance(1.5)
    got = tl.step_metrics()
    assert events.syncs == 1
    assert got["timing_forward_total"] == 1.5
    assert got["timing_forward_microbatch_mean"] == 0.5
    assert got["timing_waiting_for_data"] == 2.0
    assert got["timing_step_total"] == pytest.approx(3.53)


def test_every_telescope_op_yields_its_total_key() -> None:
    clock = FakeClock()
    tl = Timeline(clock=clock)
    for op in TIMELINE_OPS:
        with tl.region(op):
            clock.advance(1.0)
    got = tl.step_metrics()
    for op in TIMELINE_OPS:
        key = "timing_waiting_for_data" if op == "waiting_for_data" else f"timing_{op}_total"
        assert got[key] == 1.0
    assert got["timing_step_active"] == len(TIMELINE_OPS) - 1.0
