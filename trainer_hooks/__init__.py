"""trainer_hooks: the library training jobs import to send metrics to Telescope dashboard.

Pure Python (numpy; torch only inside the functions that need it; never Django). Names are
resolved lazily so `import trainer_hooks` stays cheap and torch-free.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Reduce": "trainer_hooks.specs",
    "MetricSpec": "trainer_hooks.specs",
    "StepWindow": "trainer_hooks.window",
    "reduce_window": "trainer_hooks.reduce",
    "RewardResult": "trainer_hooks.rewards",
    "connect": "trainer_hooks.sender",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'trainer_hooks' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
