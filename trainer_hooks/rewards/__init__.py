"""Reward capture: `RewardResult`, tool metrics, and `RewardRecorder`.

An environment's `compute_reward` returns a `RewardResult(total_reward, sample_metrics)`. To get
every result onto the dashboard with the sample's identity, wrap the function with a recorder
(`@recorder.capture`) or call `recorder.record(result, sample_id=..., group_id=...)`; add the
columns known only later (advantage, tokens, stop reason, off-policy lag, discard reason, and
the `prompt` and `completion` text) with `recorder.annotate(...)`, then `recorder.flush()`
hands the step's samples to the client as columnar `samples` messages. Tool-calling
environments merge `get_tool_metrics(state)`-style dicts (`total_tool_calls`,
`tool_success_rate`, `<name>_calls`, ...) into the sample metrics with `merge_tool_metrics` or
the recorder's `tool_metrics=` argument.

Recording never raises into the caller: problems are logged once and counted in `stats`.

Modules: `result` (`RewardResult`, normalizing what a `compute_reward` returns, tool
metrics), `recorder` (`RewardRecorder`) and `ranges` (environment range declarations from a
YAML file, dicts or environment classes). This package gathers their public names.
"""

from __future__ import annotations

from trainer_hooks.rewards.recorder import RewardRecorder
from trainer_hooks.rewards.result import (
    RewardResult,
    as_reward_result,
    merge_tool_metrics,
    results_to_columns,
    tool_metrics,
)

__all__ = ["RewardRecorder", "RewardResult", "as_reward_result", "merge_tool_metrics",
           "results_to_columns", "tool_metrics"]
