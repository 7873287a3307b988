"""`watch_prometheus` against a real `prometheus_client` exposition served on loopback (what
vLLM's /metrics is): sample names and labels → gauge names, hosts and devices, histogram
buckets left out, values followed from scrape to scrape, a server that is down, the thread
stopped by `close()`, and the missing extra named."""

from __future__ import annotations

import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from devtools.live_server import free_port
from tests.hooks.test_spans import column, of_type
from tests.hooks_sender.test_sender import offline
from trainer_hooks import watch_prometheus
from trainer_hooks.timeline.prometheus import PrometheusWatcher
from trainer_hooks.transport.client import Client


class Exposition:
    """A vLLM-like registry served by prometheus_client's own HTTP server on a free port."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.running = Gauge("vllm:num_requests_running", "running", ["model_name", "engine"],
                             registry=self.registry)
        self.success = Counter("vllm:request_success", "finished", ["model_name",
                                                                    "finished_reason"],
                               registry=self.registry)
        self.latency = Histogram("vllm:e2e_request_latency_seconds", "latency",
                                 ["model_name"], buckets=(0.1, 1.0), registry=self.registry)
        self.remote = Gauge("node_load1", "load", ["instance"], registry=self.registry)
        self.server, self.thread = start_http_server(0, addr="127.0.0.1",
                                                     registry=self.registry)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_port}/metrics"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(10)


@pytest.fixture
def exposition() -> Iterator[Exposition]:
    e = Exposition()
    yield e
    e.close()


@pytest.fixture
def client(tmp_path: Path) -> Iterator[Client]:
    c = offline(tmp_path)
    yield c
    c.close(timeout=0.1)


def gauges(client: Client) -> list[tuple[str, str, object, float]]:
    msgs = of_type(client, "gauges")
    return list(zip(column(msgs, "name"), column(msgs, "host"), column(msgs, "device"),
                    column(msgs, "value"), strict=True))


def test_samples_become_gauges_named_by_prefix_and_labels(
        exposition: Exposition, client: Client) -> None:
    e = exposition
    e.running.labels("m", "0").set(3)
    e.running.labels("m", "1").set(5)
    e.success.labels("m", "stop").inc(2)
    e.success.labels("m", "length").inc()
    e.latency.labels("m").observe(0.5)
    e.remote.labels("gpu-node-7:9100").set(0.25)
    watcher = PrometheusWatcher(client, e.url, "vllm/", 3600, host=None,
                                drop_labels=("model_name",), timeout=5)
    before = time.time()
    assert watcher.scrape() == 7
    me = socket.gethostname()
    assert sorted(gauges(client), key=str) == sorted([
        ("vllm/num_requests_running", me, 0, 3.0),  # engine → device, model_name dropped
        ("vllm/num_requests_running", me, 1, 5.0),
        ("vllm/request_success_total{finished_reason=length}", me, None, 1.0),
        ("vllm/request_success_total{finished_reason=stop}", me, None, 2.0),
        ("vllm/e2e_request_latency_seconds_count", me, None, 1.0),  # no _bucket, _created
        ("vllm/e2e_request_latency_seconds_sum", me, None, 0.5),
        ("vllm/node_load1", "gpu-node-7:9100", None, 0.25),  # instance → host
    ], key=str)
    assert all(t >= before for t in column(of_type(client, "gauges"), "time"))


def test_each_scrape_follows_the_values(exposition: Exposition, client: Client) -> None:
    watcher = PrometheusWatcher(client, exposition.url, "vllm/", 3600, host="inference-1",
                                drop_labels=(), timeout=5)
    exposition.running.labels("m", "0").set(1)
    watcher.scrape()
    exposition.running.labels("m", "0").set(7)
    watcher.scrape()
    running = [(host, device, value) for name, host, device, value in gauges(client)
               if name.startswith("vllm/num_requests_running")]
    # model_name is kept (drop_labels=()): folded into the name
    names = {name for name, _, _, _ in gauges(client) if "num_requests" in name}
    assert names == {"vllm/num_requests_running{model_name=m}"}
    assert running == [("inference-1", 0, 1.0), ("inference-1", 0, 7.0)]


def test_the_watcher_thread_scrapes_until_close(exposition: Exposition, tmp_path: Path) -> None:
    c = offline(tmp_path)
    exposition.running.labels("m", "0").set(4)
    watcher = watch_prometheus(c, exposition.url, prefix="vllm/", interval=0.05)
    try:
        deadline = time.monotonic() + 30
        while watcher.scrapes < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert watcher.scrapes >= 2 and watcher.errors == 0
        assert ("vllm/num_requests_running", 0, 4.0) in [
            (n, d, v) for n, _, d, v in gauges(c)]
    finally:
        c.close(timeout=0.1)
    assert not watcher._thread.is_alive()  # close() stopped it
    scrapes = watcher.scrapes
    time.sleep(0.2)
    assert watcher.scrapes == scrapes


def test_a_server_that_is_down_is_retried_and_logged_once(
        client: Client, caplog: pytest.LogCaptureFixture) -> None:
    url = f"http://127.0.0.1:{free_port()}/metrics"
    watcher = watch_prometheus(client, url, interval=0.02, timeout=1)
    deadline = time.monotonic() + 30
    while watcher.errors < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    watcher.stop()
    assert watcher.errors >= 3 and watcher.scrapes == 0
    said = [r for r in caplog.records if r.name == "trainer_hooks.timeline"]
    assert len(said) == 1 and "scraping" in said[0].getMessage()


def test_without_prometheus_client_the_extra_is_named(
        client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "prometheus_client.parser", None)
    with pytest.raises(ImportError, match=r"telescope-trainer-hooks\[prometheus\]"):
        watch_prometheus(client, "http://127.0.0.1:9/metrics")
