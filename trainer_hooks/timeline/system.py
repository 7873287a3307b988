"""`SystemSampler`: the machine's CPU, memory and GPUs as gauges, sampled by a daemon thread
(`connect(..., system_metrics=True)`; the `[system]` extra).

Every `interval` seconds (10 by default) one `log_gauges` call of:

- `cpu/util_pct`: the machine's CPU utilisation since the previous sample (psutil; from the
  second sample on, as the first has nothing to compare with);
- `host/rss_bytes`: this process's resident memory; `host/mem_used_bytes`: the machine's;
- per GPU, when NVML (`nvidia-ml-py`, module `pynvml`) imports and initialises: `gpu/util_pct`,
  `gpu/mem_used_bytes`, `gpu/power_w`, with `device` = the GPU's NVML index (the physical
  index, whatever CUDA_VISIBLE_DEVICES says). Without NVML (no driver, no GPU, no package)
  there are no GPU gauges and nothing is said; a reading a GPU does not support (power on
  some boards) is left out for that GPU.

`host` is the machine's hostname. Open it on one process per machine (local rank 0): every
sampler reads the whole machine.
"""

from __future__ import annotations

import importlib
import logging
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from trainer_hooks.timeline.optional import require

log = logging.getLogger("trainer_hooks.timeline")

GaugeLogger = Callable[..., None]  # Client.log_gauges(time=, name=, value=, host=, device=)


class SystemSampler:
    """Samples into `log_gauges` once when made, then every `interval` seconds on a daemon
    thread; `sample()` takes one sample now (any thread; samples are serialised). `stop()`
    ends the thread and NVML."""

    def __init__(self, log_gauges: GaugeLogger, interval: float = 10.0,
                 host: str | None = None, *, start: bool = True) -> None:
        if not interval > 0:
            raise ValueError("the system metrics interval must be > 0 seconds")
        self._psutil = self.check()
        self._log_gauges = log_gauges
        self.interval = float(interval)
        self.host = host or socket.gethostname()
        self._process = self._psutil.Process()
        self._psutil.cpu_percent(None)  # starts the CPU count; the next call measures since
        self._cpu_ready = False
        self._lock = threading.Lock()
        self._nvml, self._gpus = _nvml_devices()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name="telescope-system-metrics")
        if start:  # the first sample now, then the thread; False: `sample()` when wanted
            self._sample_logged()
            self._thread.start()

    @staticmethod
    def check() -> Any:
        """psutil, or an ImportError naming the extra."""
        return require("psutil", "system", "system_metrics", "psutil")

    @property
    def gpus(self) -> int:
        """The GPUs NVML reports (0 without NVML)."""
        return len(self._gpus)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample_logged()

    def _sample_logged(self) -> None:
        try:
            self.sample()
        except Exception as exc:  # noqa: BLE001 - a sampler never takes the job down
            log.warning("telescope: system metrics sample failed: %r", exc)

    def sample(self) -> int:
        """Read every gauge now and log them; returns how many."""
        with self._lock:
            names, values, devices = self._read()
            if names:
                self._log_gauges(time=time.time(), name=names, value=values, host=self.host,
                                 device=devices)
            return len(names)

    def _read(self) -> tuple[list[str], list[float], list[int | None]]:
        ps = self._psutil
        names: list[str] = []
        values: list[float] = []
        devices: list[int | None] = []

        def add(name: str, value: float, device: int | None = None) -> None:
            names.append(name)
            values.append(float(value))
            devices.append(device)

        cpu = ps.cpu_percent(None)
        if self._cpu_ready:
            add("cpu/util_pct", cpu)
        self._cpu_ready = True
        add("host/rss_bytes", self._process.memory_info().rss)
        add("host/mem_used_bytes", ps.virtual_memory().used)
        for index, handle in self._gpus:
            for name, read in _GPU_READINGS:
                try:
                    value = read(self._nvml, handle)
                except Exception:  # noqa: BLE001 - NVMLError_NotSupported and the like
                    continue
                add(name, value, index)
        return names, values, devices

    def stop(self, timeout: float | None = 5.0) -> None:
        self._stop.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout)
        with self._lock:  # not while a sample reads NVML
            if self._nvml is not None:
                try:
                    self._nvml.nvmlShutdown()
                except Exception:  # noqa: BLE001
                    pass
                self._nvml = None
                self._gpus = []


_GPU_READINGS: tuple[tuple[str, Callable[[Any, Any], float]], ...] = (
    ("gpu/util_pct", lambda nvml, h: float(nvml.nvmlDeviceGetUtilizationRates(h).gpu)),
    ("gpu/mem_used_bytes", lambda nvml, h: float(nvml.nvmlDeviceGetMemoryInfo(h).used)),
    ("gpu/power_w", lambda nvml, h: nvml.nvmlDeviceGetPowerUsage(h) / 1000.0),  # mW
)


def _nvml_devices() -> tuple[Any, list[tuple[int, Any]]]:
    """NVML and (index, handle) per GPU, or (None, []) when NVML is absent or does not
    initialise (no driver, no GPU): silently, GPU gauges are optional."""
    try:
        nvml = importlib.import_module("pynvml")
        nvml.nvmlInit()
    except Exception as exc:  # noqa: BLE001 - ImportError, NVMLError_LibraryNotFound, ...
        log.debug("telescope: no GPU metrics (NVML: %r)", exc)
        return None, []
    try:
        count = int(nvml.nvmlDeviceGetCount())
        return nvml, [(i, nvml.nvmlDeviceGetHandleByIndex(i)) for i in range(count)]
    except Exception as exc:  # noqa: BLE001
        log.debug("telescope: no GPU metrics (NVML devices: %r)", exc)
        try:
            nvml.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass
        return None, []
