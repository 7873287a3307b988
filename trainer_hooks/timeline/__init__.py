"""Where the time goes, on the trainer's side: spans, events and gauges buffered columnar and
sent as `events` and `gauges` messages (docs/protocol.md) through a client's outbox.

- `spans`: `Span` (`client.span(...)`, a context manager) and `Rows`, the buffer it appends to.
- `columns`: buffered rows → wire columns, rows the server would refuse left out and named.
- `recorder`: `TimelineRecorder`, a client's buffers and the thread that flushes them.
- `system`: `SystemSampler`, CPU, memory and GPU gauges (`connect(..., system_metrics=True)`;
  psutil, and NVML when present: the `[system]` extra).
- `prometheus`: `watch_prometheus`, a Prometheus text endpoint (vLLM's `/metrics`) scraped
  into gauges (the `[prometheus]` extra).
- `optional`: importing an optional dependency, or an error naming its extra.

Imports only `trainer_hooks.wire`; the client (`trainer_hooks.transport`) imports this.
"""
