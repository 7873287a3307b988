"""Environment range declarations (docs/protocol.md, `environments`) from what a job has.

`environment_declarations(source)` accepts an environment YAML path (its `environments:` list,
e.g. Telescope's own run config), a list of dicts, environment classes or instances, or a list
mixing all of these. Entries with the same name are merged field by field, earlier sources
first, so `["envs.yaml", CountdownEnv]` takes the reward range from the YAML and the metric
ranges from the class. Ranges never affect training, so a bad entry is logged and left out,
never raised.

A config entry (`config_entry`) is read the way Telescope's config schema reads it: numbers
may be YAML numbers or numeric strings (`"2.0"`, PyYAML's string `2e0`), a missing `weight` is
1.0, Telescope's `kwargs` is known (and not a declaration), and any other key is unknown: it is
named in a warning, with the known key it is closest to, and ignored (`declare_ranges --strict`
refuses the file instead, each key an error naming it and the file: `config_entries(...,
unknown=STRICT)` words them so). `reward_min == reward_max` is a degenerate range (every
sample normalizes to 0.5).

An environment class or instance gives its `name`, `reward_min`, `reward_max`, `weight` and
`metrics_ranges` attributes, class attributes and properties alike (Telescope's
`CountdownEnvironment.metrics_ranges` and `I3CodeEnvironment.name` are properties). A property
of a class is read from an instance made with no arguments; when the class needs arguments,
pass an instance instead. A class without a `name` is named after itself.
"""

from __future__ import annotations

import difflib
import functools
import inspect
import logging
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

from trainer_hooks.wire.protocol import ProtocolError, parse_environments

log = logging.getLogger("trainer_hooks.envconfig")

DECL_FIELDS = ("weight", "reward_min", "reward_max", "metrics_ranges")
# The keys of an environment entry: Telescope's schema (name, weight, kwargs, reward_min,
# reward_max) and this product's metrics_ranges.
ENTRY_KEYS = ("name", "weight", "kwargs", "reward_min", "reward_max", "metrics_ranges")
RANGE_KEYS = ("min", "max", "invert")
DEFAULT_WEIGHT = 1.0
# Telescope's registry loads `telescope.environments.<name>.environment` and names its class
# `<name>` (the base class's `name` property raises until the registry has set it).
TELESCOPE_MODULE = re.compile(r"telescope\.environments\.(\w+)\.environment")


def environment_declarations(source: Any) -> tuple[list[dict[str, Any]], list[str]]:
    """Wire-shaped declarations from `source`, and a list of problems (each already logged).

    Unknown keys are logged as warnings (they are no problem: the entry is kept without them).
    Every returned declaration passed `wire.protocol.parse_environments` on its own."""
    problems: list[str] = []
    merged: dict[str, dict[str, Any]] = {}
    for entry, where in _entries(source, problems):
        decl, warnings = config_entry(entry, where)
        for warning in warnings:
            log.warning("telescope: %s", warning)
        name = decl.get("name")
        if not isinstance(name, str) or not name:
            problems.append(f"{where}: environment without a name: {entry!r:.120}")
            continue
        into = merged.setdefault(name, {"name": name})
        for key in DECL_FIELDS:
            if decl.get(key) is None:
                continue
            if key == "metrics_ranges" and isinstance(into.get(key), dict) \
                    and isinstance(decl[key], dict):
                into[key] = {**decl[key], **into[key]}  # per metric, the earlier source wins
            else:
                into.setdefault(key, decl[key])
    out: list[dict[str, Any]] = []
    for decl in merged.values():
        decl.setdefault("weight", DEFAULT_WEIGHT)
        try:
            parsed = parse_environments([decl], "environments")[0]
        except ProtocolError as exc:
            problems.append(f"environment {decl['name']!r}: {exc.field}: {exc.message}")
            continue
        out.append({k: v for k, v in parsed.as_dict().items() if v not in (None, {})})
    for problem in problems:
        log.warning("telescope: range declaration left out: %s", problem)
    return out, problems


# What becomes of an unknown key, as its message says: left out of the entry (a warning), or
# the whole file refused (`declare_ranges --strict`: an error).
IGNORED = "ignored"
STRICT = "is an error with --strict"


def config_entries(envs: Any, field: str = "environments",
                   unknown: str = IGNORED) -> tuple[Any, list[str]]:
    """An `environments:` list of a config in wire shape (`config_entry` per entry, `weight`
    1.0 where missing), and the messages naming unknown keys, each saying what becomes of it
    (`unknown`: IGNORED or STRICT). Anything that is not a list of mappings is returned as it
    is, for `parse_environments` to name."""
    if not isinstance(envs, list):
        return envs, []
    out: list[Any] = []
    warnings: list[str] = []
    for i, env in enumerate(envs):
        if not isinstance(env, Mapping):
            out.append(env)
            continue
        decl, found = config_entry(env, f"{field}[{i}]", unknown)
        decl.setdefault("weight", DEFAULT_WEIGHT)
        out.append(decl)
        warnings += found
    return out, warnings


def config_entry(env: Mapping[Any, Any], where: str,
                 unknown: str = IGNORED) -> tuple[dict[str, Any], list[str]]:
    """One environment entry of a config in wire shape, and messages naming its unknown keys
    (those left out; `unknown` says so in them). Numeric strings become numbers; anything else
    is passed on as it is, for the wire validator to name."""
    warnings = _unknown_keys(env, ENTRY_KEYS, where, unknown)
    out: dict[str, Any] = {}
    for key in ("name", "weight", "reward_min", "reward_max"):
        if env.get(key) is not None:
            out[key] = env[key] if key == "name" else _number(env[key])
    ranges = env.get("metrics_ranges")
    if isinstance(ranges, Mapping):
        out["metrics_ranges"] = {}
        for metric, spec in ranges.items():
            if isinstance(spec, Mapping):
                warnings += _unknown_keys(spec, RANGE_KEYS, f"{where}.metrics_ranges.{metric}",
                                          unknown)
                spec = {k: _number(v) if k in ("min", "max") else v
                        for k, v in spec.items() if k in RANGE_KEYS}
            out["metrics_ranges"][metric] = spec
    elif ranges is not None:
        out["metrics_ranges"] = ranges
    return out, warnings


def _number(value: Any) -> Any:
    """A numeric string as a float (`"2.0"`, `"2e0"`, which YAML 1.1 reads as a string)."""
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value
    return value


def _unknown_keys(obj: Mapping[Any, Any], known: tuple[str, ...], where: str,
                  unknown: str) -> list[str]:
    out = []
    for key in obj:
        if key in known:
            continue
        close = difflib.get_close_matches(str(key), known, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        out.append(f"{where}: unknown key {key!r} {unknown}{hint}; known keys: "
                   f"{', '.join(known)}")
    return out


def _entries(source: Any, problems: list[str]) -> Iterable[tuple[Mapping[Any, Any], str]]:
    """(entry, where) for every environment of `source`, in order."""
    if source is None:
        return
    if isinstance(source, (str, os.PathLike)):
        yield from _yaml_entries(source, problems)
    elif isinstance(source, Mapping):
        if "environments" in source and "name" not in source:
            yield from _entries(list(source["environments"] or []), problems)
        else:
            yield source, f"environment {source.get('name')!r}"
    elif isinstance(source, (list, tuple)):
        for item in source:
            yield from _entries(item, problems)
    else:
        entry = _from_class(source, problems)
        if entry is not None:
            yield entry, _class_name(source)


def _yaml_entries(path: str | os.PathLike[str],
                  problems: list[str]) -> Iterable[tuple[Mapping[Any, Any], str]]:
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
    for i, env in enumerate(envs):
        if isinstance(env, dict):
            yield env, f"{os.fspath(path)}: environments[{i}]"
        else:
            problems.append(f"{os.fspath(path)!r}: environments[{i}] is not a mapping")


def _class_name(env: Any) -> str:
    cls = env if isinstance(env, type) else type(env)
    return cls.__qualname__


def _from_class(env: Any, problems: list[str]) -> dict[str, Any] | None:
    """The declaration fields of an environment class or instance (None when its name cannot
    be read: a problem says why). A property of a class is read from `cls()`."""
    reader = _AttributeReader(env)
    out: dict[str, Any] = {}
    for key in ("name", *DECL_FIELDS):
        value = reader.read(key)
        if value is None or callable(value):
            continue
        if key == "metrics_ranges":
            if not isinstance(value, Mapping):
                reader.errors[key] = (f"{reader.label}.metrics_ranges is a "
                                      f"{type(value).__name__}, not a mapping of metric name "
                                      "to {min, max, invert}")
                continue
            value = dict(value)
        out[key] = value
    if "name" not in out:
        registry = TELESCOPE_MODULE.fullmatch(reader.cls.__module__)
        if registry is not None:  # what telescope.environments.get_environment names it
            reader.errors.pop("name", None)
            out["name"] = registry.group(1)
        elif "name" not in reader.errors:
            out["name"] = reader.cls.__name__
    problems.extend(reader.errors.values())
    return out if "name" in out else None


class _AttributeReader:
    """Reads attributes of a class or instance; a class's properties through one instance made
    with no arguments (made at most once, only when a property is read). `errors` says, per
    attribute, why it could not be read."""

    def __init__(self, env: Any) -> None:
        self.env = env
        self.cls: type = env if isinstance(env, type) else type(env)
        self.label = self.cls.__qualname__
        self.errors: dict[str, str] = {}
        self._instance: Any = None if isinstance(env, type) else env
        self._instance_error: str | None = None

    def read(self, key: str) -> Any:
        try:
            static = inspect.getattr_static(self.env, key)
        except AttributeError:
            return None
        holder = self.env
        if isinstance(self.env, type) and isinstance(
                static, (property, functools.cached_property)):
            holder = self._make_instance(key)
            if holder is None:
                return None
        try:
            return getattr(holder, key)
        except Exception as exc:  # noqa: BLE001 - the user's property: any error is theirs
            self.errors[key] = (f"{self.label}.{key} could not be read "
                                f"({type(exc).__name__}: {exc})")
            return None

    def _make_instance(self, key: str) -> Any:
        if self._instance is None and self._instance_error is None:
            try:
                self._instance = self.cls()
            except Exception as exc:  # noqa: BLE001 - the user's constructor
                self._instance_error = f"{type(exc).__name__}: {exc}"
        if self._instance is None:
            self.errors[key] = (f"{self.label}.{key} is a property and {self.label}() failed "
                                f"({self._instance_error}): pass an instance, e.g. "
                                f"environments=[{self.label}(...)]")
        return self._instance
