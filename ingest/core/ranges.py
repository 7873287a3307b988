"""Declared ranges: of one environment's reward and sample metrics (`EnvRanges`, from the
environment YAML or the trainer's `run.start` / `ranges`), and the reader of a run's."""

from __future__ import annotations

from dataclasses import dataclass, field

import orjson
from django.db import connection


@dataclass(frozen=True)
class MetricRange:
    min: float | None = None
    max: float | None = None
    invert: bool = False


@dataclass(frozen=True)
class EnvRanges:
    """Declared ranges of one environment (from the YAML or the trainer)."""

    reward_min: float | None = None
    reward_max: float | None = None
    metrics: dict[str, MetricRange] = field(default_factory=dict)


def env_ranges(run_id: int) -> dict[str, EnvRanges]:
    """The run's declared ranges per environment (raw SQL: read per aggregation pass)."""
    with connection.cursor() as cur:
        cur.execute("SELECT name, reward_min, reward_max, metrics_ranges FROM ingest_environment"
                    " WHERE run_id = %s", [run_id])
        rows = cur.fetchall()
    out = {}
    for name, lo, hi, specs in rows:
        specs = orjson.loads(specs) if isinstance(specs, str | bytes) else specs
        metrics = {m: MetricRange(spec.get("min"), spec.get("max"), bool(spec.get("invert")))
                   for m, spec in (specs or {}).items()}
        out[name] = EnvRanges(lo, hi, metrics)
    return out
