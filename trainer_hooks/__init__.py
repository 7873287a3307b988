"""trainer_hooks: the library training jobs import to send metrics to Telescope dashboard.

Pure Python (numpy; torch only inside the functions that need it; never Django). Names are
resolved lazily so `import trainer_hooks` stays cheap and torch-free.

Five subpackages, each importing only those listed after it:

- `transport`: `connect()` and the `Client` — the durable, non-blocking sender.
- `timeline`: where the time goes — spans, events and gauges buffered for the client, system
  metrics (`connect(..., system_metrics=True)`) and `watch_prometheus`.
- `rewards`: reward capture (`RewardResult`, `RewardRecorder`) and environment range
  declarations.
- `metrics`: step windows (`MetricSpec`, `Reduce`, `StepWindow`) and their exact reduction
  across data-parallel ranks (`reduce_window`), per-chunk formulas and timings.
- `wire`: the wire schema, shared with the server.

`integrations` holds the Hugging Face Trainer / TRL callback (the `[hf]` extra).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    # what the names below resolve to, for type checkers (re-exported: `import X as X`)
    from trainer_hooks.metrics.reduce import reduce_window as reduce_window
    from trainer_hooks.metrics.specs import MetricSpec as MetricSpec
    from trainer_hooks.metrics.specs import Reduce as Reduce
    from trainer_hooks.metrics.window import StepWindow as StepWindow
    from trainer_hooks.rewards.result import RewardResult as RewardResult
    from trainer_hooks.timeline.prometheus import watch_prometheus as watch_prometheus
    from trainer_hooks.transport.client import connect as connect

_EXPORTS = {
    "Reduce": "trainer_hooks.metrics.specs",
    "MetricSpec": "trainer_hooks.metrics.specs",
    "StepWindow": "trainer_hooks.metrics.window",
    "reduce_window": "trainer_hooks.metrics.reduce",
    "RewardResult": "trainer_hooks.rewards.result",
    "connect": "trainer_hooks.transport.client",
    "watch_prometheus": "trainer_hooks.timeline.prometheus",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'trainer_hooks' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
