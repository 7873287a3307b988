"""Validation of `environments` declarations: each environment's weight, reward range and
metric ranges (docs/protocol.md, `run.start` and `ranges`). Every problem is a
`ProtocolError` naming the offending field.
"""

from __future__ import annotations

from typing import Any

from trainer_hooks.wire.schema import (
    MAX_ENVIRONMENTS,
    EnvironmentDecl,
    ProtocolError,
    check_key,
    opt_number,
)


def parse_environments(envs: Any, field: str) -> list[EnvironmentDecl]:
    """Validate an `environments:` list: unique names, finite bounds with min <= max (equal
    bounds are a degenerate range: every value normalizes to 0.5)."""
    if not isinstance(envs, list):
        raise ProtocolError("wrong_type", field, "environments must be a list")
    if len(envs) > MAX_ENVIRONMENTS:
        raise ProtocolError("too_many", field, f"more than {MAX_ENVIRONMENTS} environments")
    out: list[EnvironmentDecl] = []
    seen: set[str] = set()
    for i, env in enumerate(envs):
        where = f"{field}[{i}]"
        if not isinstance(env, dict):
            raise ProtocolError("wrong_type", where, "an environment must be an object")
        name = check_key(env.get("name"), f"{where}.name", kind="environment name")
        if name in seen:
            raise ProtocolError("invalid", f"{where}.name", f"environment {name!r} is repeated")
        seen.add(name)
        lo = _field_number(env, "reward_min", where)
        hi = _field_number(env, "reward_max", where)
        _check_bounds(lo, hi, f"{where}.reward_max")
        out.append(EnvironmentDecl(
            name=name,
            weight=_field_number(env, "weight", where),
            reward_min=lo,
            reward_max=hi,
            metrics_ranges=_metrics_ranges(env.get("metrics_ranges"), f"{where}.metrics_ranges"),
        ))
    return out


def _field_number(obj: dict[str, Any], name: str, where: str) -> float | None:
    try:
        return opt_number(obj, name)
    except ProtocolError as exc:
        raise ProtocolError(exc.code, f"{where}.{name}", exc.message) from None


def _check_bounds(lo: float | None, hi: float | None, where: str) -> None:
    if lo is not None and hi is not None and not lo <= hi:
        raise ProtocolError("invalid", where, f"max ({hi}) must not be less than min ({lo})")


def _metrics_ranges(ranges: Any, where: str) -> dict[str, dict[str, Any]]:
    if ranges is None:
        return {}
    if not isinstance(ranges, dict):
        raise ProtocolError("wrong_type", where, "metrics_ranges must be an object")
    out: dict[str, dict[str, Any]] = {}
    for name, spec in ranges.items():
        at = f"{where}.{name}"
        check_key(name, at, kind="metric name")
        if not isinstance(spec, dict):
            raise ProtocolError("wrong_type", at, "a metric range must be an object")
        lo = _field_number(spec, "min", at)
        hi = _field_number(spec, "max", at)
        _check_bounds(lo, hi, f"{at}.max")
        invert = spec.get("invert", False)
        if not isinstance(invert, bool):
            raise ProtocolError("wrong_type", f"{at}.invert", "invert must be true or false")
        out[name] = {"min": lo, "max": hi, "invert": invert}
    return out

