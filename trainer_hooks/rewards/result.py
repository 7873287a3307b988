"""`RewardResult`, normalizing what a `compute_reward` returns, and tool metrics.

An environment's `compute_reward` returns a `RewardResult(total_reward, sample_metrics)`;
`as_reward_result` also accepts another framework's result class, a mapping, a
`(reward, metrics)` pair or a bare number. Tool-calling environments merge
`get_tool_metrics(state)`-style dicts (`total_tool_calls`, `tool_success_rate`, `<name>_calls`,
...) into the sample metrics with `merge_tool_metrics`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass
class RewardResult:
    """What `compute_reward` returns: the scalar reward and any per-sample metrics."""

    total_reward: float
    sample_metrics: dict[str, float | None] = field(default_factory=dict)


def as_reward_result(obj: Any) -> RewardResult:
    """A `RewardResult` from one, or from any object with `total_reward` / `sample_metrics`
    attributes (another framework's class), a mapping with those keys, a
    `(reward, metrics)` pair, or a bare number."""
    if isinstance(obj, RewardResult):
        return obj
    if isinstance(obj, Mapping):
        return RewardResult(obj["total_reward"], dict(obj.get("sample_metrics") or {}))
    if hasattr(obj, "total_reward"):
        return RewardResult(obj.total_reward, dict(getattr(obj, "sample_metrics", None) or {}))
    if isinstance(obj, tuple) and len(obj) == 2:
        return RewardResult(obj[0], dict(obj[1] or {}))
    if isinstance(obj, (int, float)) or hasattr(obj, "__float__"):
        return RewardResult(float(obj), {})
    raise TypeError(f"not a reward result: {type(obj).__name__}")


def results_to_columns(results: Iterable[Any]) -> tuple[list[Any], dict[str, list[Any]]]:
    """Rewards and sample-metric columns (union of keys, None where a result lacks one)."""
    rs = [as_reward_result(r) for r in results]
    names: dict[str, None] = {}
    for r in rs:
        names.update(dict.fromkeys(r.sample_metrics))
    metrics = {k: [r.sample_metrics.get(k) for r in rs] for k in names}
    return [r.total_reward for r in rs], metrics


# ---------------------------------------------------------------- tool metrics


def tool_metrics(calls: Mapping[str, int], *, errors: int = 0) -> dict[str, float | None]:
    """The `get_tool_metrics(state)` dict from per-tool call counts and an error count:
    `total_tool_calls`, `tool_success_count`, `tool_error_count`, `tool_success_rate` (None
    without calls), `unique_tools_used` and `<name>_calls` per tool."""
    total = sum(int(c) for c in calls.values())
    success = total - int(errors)
    out: dict[str, float | None] = {
        "total_tool_calls": total,
        "tool_success_count": success,
        "tool_error_count": int(errors),
        "tool_success_rate": success / total if total else None,
        "unique_tools_used": sum(1 for c in calls.values() if c),
    }
    out.update({f"{name}_calls": int(c) for name, c in calls.items()})
    return out


def merge_tool_metrics(result: Any, tools: Mapping[str, Any] | None) -> Any:
    """Merge a tool-metrics dict into a `RewardResult`'s (or a plain dict of) sample metrics.

    Only numbers (and None) are taken; a key the environment already set keeps its value.
    Returns a new object of the same kind."""
    numeric = {k: v for k, v in (tools or {}).items()
               if isinstance(k, str) and (v is None or _is_number(v))}
    if isinstance(result, Mapping) and "total_reward" not in result:
        return {**numeric, **result}
    r = as_reward_result(result)
    return RewardResult(r.total_reward, {**numeric, **r.sample_metrics})


def _is_number(v: Any) -> bool:
    if isinstance(v, (str, bytes)):
        return False
    try:
        float(v)
    except (TypeError, ValueError):
        return False
    return True
