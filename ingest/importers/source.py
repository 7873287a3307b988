"""What every reader hands the importer: `SourceRun`s of `(step, time, metrics)` rows.

Pure: no Django. The readers (`tensorboard_events`, `trackio_db`, `wandb_offline`) only read
their tool's files; `ingest.importers.load` turns the rows into wire messages.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from trainer_hooks.wire.protocol import (
    MAX_KEY_CHARS,
    MAX_METRICS_PER_MESSAGE,
    MAX_TEXT_CHARS,
    ProtocolError,
    check_key,
)
from trainer_hooks.wire.schema import deceptive

Row = tuple[int, float | None, dict[str, float | bool | str | None]]  # step, time, metrics

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


TEXT_TOO_LONG = f"text over {MAX_TEXT_CHARS} characters or with control characters"


def step_value(value: Any) -> tuple[Any, str | None]:
    """(value, None) for a value a step stores — a number (NaN and ±Inf as None: the server
    counts them), a bool, a string of at most MAX_TEXT_CHARS (a categorical key) — else
    (None, why it is left out): media and histograms by their type, long text, anything else
    (lists, objects, None, which a source writes for "not logged at this step")."""
    if isinstance(value, (bool, str)):
        if isinstance(value, str) and (len(value) > MAX_TEXT_CHARS or deceptive(value)):
            return None, TEXT_TOO_LONG
        return value, None
    if isinstance(value, (int, float)):
        return (float(value) if math.isfinite(value) else None), None
    if hasattr(value, "item") and getattr(value, "size", 2) == 1:  # a numpy scalar
        return step_value(value.item())
    if isinstance(value, Mapping) and isinstance(value.get("_type"), str):
        return None, media_reason(value["_type"])
    return None, "not a number"


def media_reason(kind: str) -> str:
    """How a left-out media value is counted: `histogram`, or `media (<its type>)`."""
    return "histogram" if "histogram" in kind else f"media ({kind})"


def count(skipped: dict[str, int], why: str, n: int = 1) -> None:
    skipped[why] = skipped.get(why, 0) + n


def clean_metrics(raw: Mapping[Any, Any], skipped: dict[str, int]) -> dict[str, Any]:
    """The values of one source row a step stores, under valid keys; others counted in
    `skipped`."""
    out: dict[str, Any] = {}
    for key, value in raw.items():
        v, why = step_value(value)
        if why is not None:
            count(skipped, why)
            continue
        name = clean_key(key)
        if name is None:
            count(skipped, "bad key")
            continue
        out[name] = v
    return out


def merge_rows(rows: Iterable[tuple[int, float | None, Mapping[str, Any]]],
               skipped: dict[str, int]) -> list[Row]:
    """Rows by step, ascending: values logged at one step in several rows merged (a later one
    wins), the step's time the latest of its rows'. A key is numeric or categorical from its
    first value on (as the server keeps it): a later value of the other kind is left out."""
    by_step: dict[int, tuple[float | None, dict[str, Any]]] = {}
    for step, when, metrics in rows:
        if step is None or step < 0:
            count(skipped, "no step", len(metrics))
            continue
        old_time, old = by_step.get(step, (None, {}))
        old.update(clean_metrics(metrics, skipped))
        times = [t for t in (old_time, when) if t is not None]
        by_step[step] = (max(times) if times else None, old)
    out = [(s, t, m) for s, (t, m) in sorted(by_step.items()) if m]
    _one_kind_per_key(out, skipped)
    return [row for row in out if row[2]]


def _one_kind_per_key(rows: list[Row], skipped: dict[str, int]) -> None:
    text: dict[str, bool] = {}  # key: categorical, from its first value that is not None
    for _, _, metrics in rows:
        for key, value in list(metrics.items()):
            if value is None:
                continue
            is_text = isinstance(value, str)
            if text.setdefault(key, is_text) != is_text:
                del metrics[key]
                count(skipped, "a number for a text key" if not is_text
                      else "text for a numeric key")


def restep(rows: Iterable[tuple[int, float | None, Mapping[str, Any]]],
           step_metric: Callable[[str], str | None], axes: set[str],
           skipped: dict[str, int], start: Mapping[str, int] | None = None
           ) -> Iterator[tuple[int, float | None, dict[str, Any]]]:
    """Rows moved to the user's step axis. Each key's value goes to the value its step metric
    (`step_metric(key)`: HF Trainer's `train/global_step`, a W&B `define_metric(...,
    step_metric=...)`) has in the same row, or else the last one logged before (as W&B's
    `step_sync` does); a key without one stays at the row's own step. The `axes` (every step
    metric) are the axis, not metrics. A value whose step metric has no whole-number value yet
    (nor one in `start`) is left out (counted)."""
    memo: dict[str, str | None] = {}
    last: dict[str, int] = dict(start or {})
    for step, when, values in rows:
        for axis in axes.intersection(values):
            at = values[axis]
            if isinstance(at, (int, float)) and not isinstance(at, bool) \
                    and math.isfinite(at) and at >= 0 and float(at).is_integer():
                last[axis] = int(at)
        moved: dict[int, dict[str, Any]] = {}
        for key, value in values.items():
            if key in axes:
                continue
            metric = memo[key] if key in memo else memo.setdefault(key, step_metric(key))
            if metric is None or metric == key:
                moved.setdefault(step, {})[key] = value
            elif metric in last:
                moved.setdefault(last[metric], {})[key] = value
            else:
                count(skipped, f"no whole-number {metric} yet")
        for at, metrics in moved.items():
            yield at, when, metrics


HF_STEP = "train/global_step"  # what HF Trainer's W&B, trackio and SwanLab callbacks log


def on_user_axis(rows: list[tuple[int, float | None, dict[str, Any]]],
                 skipped: dict[str, int]) -> list[tuple[int, float | None, dict[str, Any]]]:
    """A run's rows on HF Trainer's `train/global_step` when it logged one (the tracker's own
    counter advances on every log call: TRL's completions table and profiling timers, a
    user's own logs); the rows as they are otherwise. What was logged before the first
    `train/global_step` is at 0 (the trainer's step then: TRL's first profiling timers)."""
    if not any(HF_STEP in values for _, _, values in rows):
        return rows
    return list(restep(rows, lambda key: HF_STEP, {HF_STEP}, skipped, {HF_STEP: 0}))


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
