"""`watch_prometheus`: a Prometheus text endpoint (vLLM's `/metrics`) scraped into gauges by a
daemon thread (the `[prometheus]` extra).

    watcher = watch_prometheus(client, "http://127.0.0.1:8001/metrics", prefix="vllm/")
    ...
    watcher.stop()          # or client.close(), which stops it first

Every `interval` seconds (10 by default; the first scrape at once) the endpoint is fetched and
parsed with `prometheus_client.parser.text_string_to_metric_families` (never by hand), and
each sample becomes one gauge point at the scrape's time:

- **name** = `prefix` + the sample's name, its namespace dropped when it is the prefix's
  (`vllm:num_requests_running` → `vllm/num_requests_running`), other `:` as `/`. Counters keep
  their `_total`, summaries and histograms their `_sum` and `_count`; histogram buckets
  (`_bucket`, one series per `le`) and `_created` timestamps are left out.
- **labels**: `device`, `gpu` or `engine` (vLLM's data-parallel engine index) becomes the
  point's `device` (an int when it is one); `host` or `instance` its `host`, else the
  watcher's `host` (default: the URL's host, or this machine's hostname for a loopback
  URL). `drop_labels` (default `model_name`: one per server, long) are ignored; every other
  label is folded into the name, sorted: `vllm/request_success_total{finished_reason=stop}`,
  so each label set stays its own series.

A name over 200 characters or with a character the wire refuses is skipped (`skipped`). A
failed scrape (server down, not yet up) is logged once and retried next interval (`errors`).
"""

from __future__ import annotations

import logging
import socket
import threading
import time
import urllib.request
from collections.abc import Iterable
from typing import Any, Protocol
from urllib.parse import urlsplit

from trainer_hooks.timeline.optional import require
from trainer_hooks.warnonce import WarnOnce
from trainer_hooks.wire.schema import MAX_KEY_CHARS, deceptive

log = logging.getLogger("trainer_hooks.timeline")

DEVICE_LABELS = ("device", "gpu", "engine")
HOST_LABELS = ("host", "instance")
SKIPPED_SUFFIXES = ("_bucket", "_created")
_LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1", "0.0.0.0", ""})


class GaugeClient(Protocol):
    def log_gauges(self, *, name: Any, value: Any, time: Any = None, host: Any = None,
                   device: Any = None) -> None: ...


def watch_prometheus(client: GaugeClient, url: str, prefix: str = "vllm/",
                     interval: float = 10.0, *, host: str | None = None,
                     drop_labels: Iterable[str] = ("model_name",),
                     timeout: float = 5.0) -> PrometheusWatcher:
    """Scrape `url` into `client`'s gauges every `interval` seconds on a daemon thread (see
    the module doc); returns the watcher (`stop()`, `scrape()`). A client with `attach` (the
    trainer_hooks client) stops it on close. Raises ImportError naming the extra without
    prometheus_client."""
    watcher = PrometheusWatcher(client, url, prefix, interval, host=host,
                                drop_labels=drop_labels, timeout=timeout)
    attach = getattr(client, "attach", None)
    if attach is not None:
        attach(watcher)
    watcher.start()
    return watcher


class PrometheusWatcher:
    """One endpoint scraped into gauges (see the module doc). `scrape()` scrapes once now;
    `start()` / `stop()` run and end the thread."""

    def __init__(self, client: GaugeClient, url: str, prefix: str, interval: float, *,
                 host: str | None, drop_labels: Iterable[str], timeout: float) -> None:
        if not interval > 0:
            raise ValueError("the scrape interval must be > 0 seconds")
        self._parser = require("prometheus_client.parser", "prometheus", "watch_prometheus",
                               "prometheus-client")
        self.client = client
        self.url = url
        self.prefix = prefix
        self.interval = float(interval)
        self.timeout = timeout
        self.host = host or _host_of(url)
        self.drop_labels = frozenset(drop_labels)
        self.scrapes = self.errors = self.skipped = 0
        self._stem = prefix.rstrip("/")
        self._warn = WarnOnce(log)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name=f"telescope-prometheus[{url}]")

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float | None = 5.0) -> None:
        self._stop.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.scrape()
            except Exception as exc:  # noqa: BLE001 - down, not yet up, or garbage: retry
                self.errors += 1
                self._warn(("scrape", type(exc)), "telescope: scraping %s failed (retrying "
                           "every %g s): %r", self.url, self.interval, exc)
            self._stop.wait(self.interval)

    def scrape(self) -> int:
        """Fetch and parse the endpoint once and log its samples as gauges; returns how many
        points were logged."""
        with urllib.request.urlopen(self.url, timeout=self.timeout) as response:
            text = response.read().decode("utf-8", "replace")
        now = time.time()
        names: list[str] = []
        values: list[float] = []
        hosts: list[str] = []
        devices: list[str | int | None] = []
        for family in self._parser.text_string_to_metric_families(text):
            for sample in family.samples:
                point = self.point(sample.name, sample.labels)
                if point is None:
                    continue
                names.append(point[0])
                hosts.append(point[1])
                devices.append(point[2])
                values.append(float(sample.value))
        if names:
            self.client.log_gauges(time=now, name=names, value=values, host=hosts,
                                   device=devices)
        self.scrapes += 1
        return len(names)

    def point(self, sample: str, labels: dict[str, str]
              ) -> tuple[str, str, str | int | None] | None:
        """(gauge name, host, device) of one sample, or None when it is left out."""
        if sample.endswith(SKIPPED_SUFFIXES):
            return None
        name = sample
        for sep in (":", "_"):
            if self._stem and name.startswith(self._stem + sep):
                name = name[len(self._stem) + 1:]
                break
        name = self.prefix + name.replace(":", "/")
        device: str | int | None = None
        host: str | None = None
        folded = []
        for key in sorted(labels):
            value = labels[key]
            if key in self.drop_labels:
                continue
            if key in DEVICE_LABELS and device is None:
                device = int(value) if value.isdigit() else value
            elif key in HOST_LABELS and host is None:
                host = value
            else:
                folded.append(f"{key}={value}")
        if folded:
            name += "{" + ",".join(folded) + "}"
        host = host or self.host
        if not all(_label_ok(text) for text in (name, host, device) if isinstance(text, str)):
            self.skipped += 1
            return None
        return name, host, device


def _label_ok(text: str) -> bool:
    return 0 < len(text) <= MAX_KEY_CHARS and deceptive(text) is None


def _host_of(url: str) -> str:
    host = urlsplit(url).hostname or ""
    return socket.gethostname() if host in _LOOPBACK else host
