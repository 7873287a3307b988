"""System metrics: psutil's CPU and memory readings always, GPUs through NVML when it is
there (a fake `pynvml` injected into sys.modules), none and no complaint when it is not (no
module, or the real nvidia-ml-py on a machine without a driver); `connect(...,
system_metrics=True)` samples into the client's outbox and `close()` stops the sampler."""

from __future__ import annotations

import socket
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.hooks.test_spans import column, of_type
from tests.hooks_sender.test_sender import offline
from trainer_hooks.timeline.system import SystemSampler
from trainer_hooks.transport.client import Client, connect

HOST_GAUGES = ["host/rss_bytes", "host/mem_used_bytes"]


class NotSupported(Exception):
    """What NVML raises for a reading a board does not have (power, on some)."""


def fake_nvml(gpus: int = 2) -> types.ModuleType:
    """A `pynvml` with `gpus` devices: GPU i is 10·(i+1) % busy, uses (i+1) GiB, draws
    (i+1)·100 W (in mW, as NVML reports); GPU 1 has no power reading."""
    nvml = types.ModuleType("pynvml")
    nvml.calls = []  # type: ignore[attr-defined]

    def power(handle: int) -> int:
        if handle == 1:
            raise NotSupported("power")
        return (handle + 1) * 100_000

    nvml.nvmlInit = lambda: nvml.calls.append("init")  # type: ignore[attr-defined]
    nvml.nvmlShutdown = lambda: nvml.calls.append("shutdown")  # type: ignore[attr-defined]
    nvml.nvmlDeviceGetCount = lambda: gpus  # type: ignore[attr-defined]
    nvml.nvmlDeviceGetHandleByIndex = lambda i: i  # type: ignore[attr-defined]
    nvml.nvmlDeviceGetUtilizationRates = (  # type: ignore[attr-defined]
        lambda h: types.SimpleNamespace(gpu=10 * (h + 1), memory=0))
    nvml.nvmlDeviceGetMemoryInfo = (  # type: ignore[attr-defined]
        lambda h: types.SimpleNamespace(used=(h + 1) << 30, total=80 << 30))
    nvml.nvmlDeviceGetPowerUsage = power  # type: ignore[attr-defined]
    return nvml


@pytest.fixture
def client(tmp_path: Path) -> Iterator[Client]:
    c = offline(tmp_path)
    yield c
    c.close(timeout=0.1)


def points(client: Client) -> list[tuple[str, Any, float]]:
    msgs = of_type(client, "gauges")
    return list(zip(column(msgs, "name"), column(msgs, "device"), column(msgs, "value"),
                    strict=True))


def test_gpus_are_read_through_nvml_one_series_per_device(
        client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    nvml = fake_nvml()
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    sampler = SystemSampler(client.log_gauges, start=False)
    assert sampler.gpus == 2
    assert sampler.sample() == 2 + 5  # host memory twice, 3 + 2 GPU readings; no CPU yet
    assert sampler.sample() == 1 + 2 + 5  # now the CPU since the first sample too
    sampler.stop()
    assert nvml.calls == ["init", "shutdown"]  # type: ignore[attr-defined]
    got = points(client)
    gpu = {(name, device): value for name, device, value in got if name.startswith("gpu/")}
    assert gpu == {("gpu/util_pct", 0): 10.0, ("gpu/util_pct", 1): 20.0,
                   ("gpu/mem_used_bytes", 0): float(1 << 30),
                   ("gpu/mem_used_bytes", 1): float(2 << 30), ("gpu/power_w", 0): 100.0}
    names = [name for name, _, _ in got]
    assert names.count("cpu/util_pct") == 1 and names.count("host/rss_bytes") == 2
    host = {name: value for name, device, value in got if device is None}
    assert 0 <= host["cpu/util_pct"] <= 100 and host["host/rss_bytes"] > 1 << 20
    assert host["host/mem_used_bytes"] > host["host/rss_bytes"] / 2
    msgs = of_type(client, "gauges")
    assert set(column(msgs, "host")) == {socket.gethostname()}


def test_without_nvml_there_are_no_gpu_gauges_and_no_error(
        client: Client, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # not installed
    sampler = SystemSampler(client.log_gauges, start=False)
    assert sampler.gpus == 0 and sampler.sample() == 2
    sampler.stop()
    assert [name for name, _, _ in points(client)] == HOST_GAUGES
    assert not [r for r in caplog.records if r.name == "trainer_hooks.timeline"
                and r.levelname in ("WARNING", "ERROR")]


def test_the_real_nvml_package_without_a_driver_is_silent(client: Client) -> None:
    pytest.importorskip("pynvml")
    sampler = SystemSampler(client.log_gauges, start=False)
    try:
        import pynvml

        pynvml.nvmlInit()
        pynvml.nvmlShutdown()
        has_driver = True
    except Exception:  # noqa: BLE001 - NVMLError_LibraryNotFound here
        has_driver = False
    gpus = sampler.gpus
    n = sampler.sample()
    sampler.stop()
    if has_driver:  # a GPU machine: each GPU reads its utilisation and memory, maybe power
        assert 2 + 2 * gpus <= n <= 2 + 3 * gpus
    else:
        assert (gpus, n) == (0, 2)


def test_connect_with_system_metrics_samples_until_close(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml(gpus=1))
    c = connect(f"ws://127.0.0.1:{_port()}", "tok", "run-1", spool_dir=tmp_path / "spool",
                spill_after=0, system_metrics=3600.0)
    try:
        [sampler] = c._attached
        assert isinstance(sampler, SystemSampler) and sampler.interval == 3600.0
        got = points(c)  # the first sample is taken by connect
        assert [name for name, _, _ in got] == [*HOST_GAUGES, "gpu/util_pct",
                                                "gpu/mem_used_bytes", "gpu/power_w"]
    finally:
        c.close(timeout=0.1)
    assert not sampler._thread.is_alive()


def test_system_metrics_without_psutil_name_the_extra(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psutil", None)
    with pytest.raises(ImportError, match=r"telescope-trainer-hooks\[system\]"):
        connect("ws://127.0.0.1:9", "tok", "run-1", spool_dir=tmp_path, system_metrics=True)


def _port() -> int:
    from devtools.live_server import free_port

    return free_port()
