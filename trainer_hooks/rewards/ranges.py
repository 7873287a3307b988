"""Environment range declarations (docs/protocol.md, `environments`) from what a job has.

`environment_declarations(source)` accepts an environment YAML path (its `environments:` list),
a list of dicts in the wire shape, environment classes or instances (their `metrics_ranges`
attribute, and `reward_min` / `reward_max` / `weight` attributes when present), or a list mixing
all of these. Entries with the same name are merged field by field, earlier sources first, so
`["envs.yaml", CountdownEnv]` takes the reward range from the YAML and the metric ranges from
the class. Only the declaration fields are kept: a YAML entry's other keys (dataset, kwargs...)
are ignored. Ranges never affect training, so a bad entry is logged and left out, never raised.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping
from typing import Any

from trainer_hooks.wire.protocol import ProtocolError, parse_environments

log = logging.getLogger("trainer_hooks.envconfig")

DECL_FIELDS = ("weight", "reward_min", "reward_max", "metrics_ranges")


def environment_declarations(source: Any) -> tuple[list[dict[str, Any]], list[str]]:
    """Wire-shaped declarations from `source`, and a list of problems (each already logged).

    Every returned declaration passed `wire.protocol.parse_environments` on its own."""
    problems: list[str] = []
    merged: dict[str, dict[str, Any]] = {}
    for entry in _entries(source, problems):
        name = entry.get("name")
        if not isinstance(name, str) or not name:
            problems.append(f"environment without a name: {entry!r:.120}")
            continue
        into = merged.setdefault(name, {"name": name})
        for key in DECL_FIELDS:
            if entry.get(key) is None:
                continue
            if key == "metrics_ranges" and isinstance(into.get(key), dict) \
                    and isinstance(entry[key], dict):
                into[key] = {**entry[key], **into[key]}  # per metric, the earlier source wins
            else:
                into.setdefault(key, entry[key])
    out: list[dict[str, Any]] = []
    for decl in merged.values():
        try:
            parsed = parse_environments([decl], "environments")[0]
        except ProtocolError as exc:
            problems.append(f"environment {decl['name']!r}: {exc.field}: {exc.message}")
            continue
        out.append({k: v for k, v in parsed.as_dict().items() if v not in (None, {})})
    for problem in problems:
        log.warning("telescope: range declaration left out: %s", problem)
    return out, problems


def _entries(source: Any, problems: list[str]) -> Iterable[dict[str, Any]]:
    if source is None:
        return
    if isinstance(source, (str, os.PathLike)):
        yield from _yaml_entries(source, problems)
    elif isinstance(source, Mapping):
        if "environments" in source and "name" not in source:
            yield from _entries(list(source["environments"] or []), problems)
        else:
            yield dict(source)
    elif isinstance(source, (list, tuple)):
        for item in source:
            yield from _entries(item, problems)
    else:
        yield _from_class(source)


def _yaml_entries(path: str | os.PathLike[str], problems: list[str]) -> Iterable[dict[str, Any]]:
    import yaml  # only when a YAML file is given

    try:
        with open(path, encoding="utf-8") as f:
            doc = yaml.safe_load(f)
    except (OSError, yaml.YAMLError) as exc:
        problems.append(f"cannot read {os.fspath(path)!r}: {exc}")
        return
    envs = doc.get("environments") if isinstance(doc, dict) else doc
    if not isinstance(envs, list):
        problems.append(f"{os.fspath(path)!r} has no `environments:` list")
        return
    for env in envs:
        if isinstance(env, dict):
            yield {k: env.get(k) for k in ("name", *DECL_FIELDS) if k in env}
        else:
            problems.append(f"{os.fspath(path)!r}: an environment entry is not a mapping")


def _from_class(env: Any) -> dict[str, Any]:
    """An environment class or instance: `name` attribute (else the class name),
    `metrics_ranges`, and optional `reward_min`, `reward_max`, `weight` attributes."""
    cls = env if isinstance(env, type) else type(env)
    name = getattr(env, "name", None)
    if not isinstance(name, str) or not name:
        name = cls.__name__
    out: dict[str, Any] = {"name": name}
    for key in DECL_FIELDS:
        value = getattr(env, key, None)
        if value is not None and not callable(value):
            out[key] = dict(value) if key == "metrics_ranges" else value
    return out
