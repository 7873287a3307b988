"""What every reader hands the importer: `SourceRun`s of `(step, time, metrics)` rows.

Pure: no Django. The readers (`tensorboard_events`, `trackio_db`, `wandb_offline`) only read
their tool's files; `ingest.importers.load` turns the rows into wire messages.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from trainer_hooks.wire.protocol import (
    MAX_KEY_CHARS,
    MAX_METRICS_PER_MESSAGE,
    ProtocolError,
    check_key,
)

Row = tuple[int, float | None, dict[str, float | bool | None]]  # step, unix time, metrics

def _visible(key: str) -> str:
    """`key` without what the wire refuses in a key (wire.schema.deceptive: control, format
    and invisible characters)."""
    return key if key.isprintable() else "".join(c for c in key if c.isprintable())


@dataclass
class SourceRun:
    """One run of another tool, ready to import.

    `identity` names the source run for good (a W&B or trackio run id, a TensorBoard run's
    first event file), so importing it again finds the run and the messages it sent before.
    `read()` returns its steps in ascending order, one row per step, and completes `config`,
    `status` and `skipped` where the tool keeps them beside the rows, and `warnings` (a torn
    tail: `status` is then None); it raises `DamagedSource` for a damaged file, having read
    the whole run first, so nothing of it has been stored."""

    kind: str
    name: str
    identity: str
    read: Callable[[], list[Row]]
    config: dict[str, Any] = field(default_factory=dict)
    status: str | None = None  # "finished" / "failed" when the source says how it ended
    steps_hint: int | None = None  # how many rows, when known before reading (progress)
    skipped: dict[str, int] = field(default_factory=dict)  # values left out, by reason
    warnings: list[str] = field(default_factory=list)  # said on stderr; the run is imported


class DamagedSource(ValueError):
    """A source file that is not as its tool writes it (a checksum that does not match, a
    record that does not decode, a malformed database): nothing of its run is imported. The
    message names the file and where (a byte offset, a row)."""


def clean_key(key: str) -> str | None:
    """A source key as a valid Telescope key: control and invisible characters dropped, empty
    `/` segments collapsed, at most MAX_KEY_CHARS; None when nothing is left."""
    key = "/".join(part for part in _visible(str(key)).split("/") if part)
    key = key[:MAX_KEY_CHARS].rstrip("/")
    try:
        return check_key(key, "metrics")
    except ProtocolError:
        return None


def clean_run_name(name: str) -> str:
    return clean_key(name) or "imported"


def scalar(value: Any) -> tuple[bool, float | bool | None]:
    """(keep, value): numbers (NaN and ±Inf as None: the server counts them), bools; not
    strings, lists, media or None (which a source writes for "not logged at this step")."""
    if isinstance(value, bool):
        return True, value
    if isinstance(value, (int, float)):
        return True, float(value) if math.isfinite(value) else None
    if hasattr(value, "item") and getattr(value, "size", 2) == 1:  # a numpy scalar
        return scalar(value.item())
    return False, None


def clean_metrics(raw: Mapping[Any, Any], skipped: dict[str, int]) -> dict[str, Any]:
    """The scalar metrics of one source row under valid keys; others counted in `skipped`."""
    out: dict[str, Any] = {}
    for key, value in raw.items():
        keep, v = scalar(value)
        if not keep:
            skipped["not a number"] = skipped.get("not a number", 0) + 1
            continue
        name = clean_key(key)
        if name is None:
            skipped["bad key"] = skipped.get("bad key", 0) + 1
            continue
        out[name] = v
    return out


def merge_rows(rows: Iterable[tuple[int, float | None, Mapping[str, Any]]],
               skipped: dict[str, int]) -> list[Row]:
    """Rows by step, ascending: values logged at one step in several rows merged (a later one
    wins), the step's time the latest of its rows'."""
    by_step: dict[int, tuple[float | None, dict[str, Any]]] = {}
    for step, when, metrics in rows:
        if step is None or step < 0:
            skipped["no step"] = skipped.get("no step", 0) + len(metrics)
            continue
        old_time, old = by_step.get(step, (None, {}))
        old.update(clean_metrics(metrics, skipped))
        times = [t for t in (old_time, when) if t is not None]
        by_step[step] = (max(times) if times else None, old)
    return [(s, t, m) for s, (t, m) in sorted(by_step.items()) if m]


def parts(metrics: dict[str, Any]) -> list[dict[str, Any]]:
    """A step's metrics in pieces the wire takes (MAX_METRICS_PER_MESSAGE keys each)."""
    items = list(metrics.items())
    size = MAX_METRICS_PER_MESSAGE
    return [dict(items[i:i + size]) for i in range(0, len(items), size)] or [{}]


def plain_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """A source's config without its tool's private keys (`_wandb`, trackio's `_Created`)."""
    return {str(k): v for k, v in config.items() if not str(k).startswith("_")}


def json_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """A config as the wire takes it: JSON only (non-finite numbers null, anything else its
    text), as `trainer_hooks` sends a trainer's."""
    return orjson.loads(orjson.dumps(dict(config), default=str,
                                     option=orjson.OPT_NON_STR_KEYS
                                     | orjson.OPT_SERIALIZE_NUMPY))
