"""Stored points as rows, for assertions: read through the point store (ingest.core.pointstore), so
tests see what readers see (the last write of each step; withdrawn points absent)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ingest.core import pointstore
from ingest.models import Run, Series


@dataclass(frozen=True)
class Row:
    run_id: int
    run_name: str
    sid: str
    kind: str
    key: str
    stat: str | None
    env: str | None
    step: int
    time: float
    value: float


def point_rows(**run_filter: Any) -> list[Row]:
    """Every current point of the runs matching `run_filter` (Run.objects.filter arguments)."""
    out = []
    for run in Run.objects.filter(**run_filter).order_by("pk"):
        meta = {s.pk: s for s in Series.objects.filter(run=run)}
        for pk, (step, time, value) in pointstore.load(run.pk, list(meta)).items():
            s = meta[pk]
            out += [Row(run.pk, run.name, s.sid, s.kind, s.key, s.stat, s.env, int(a), float(b),
                        float(c))
                    for a, b, c in zip(step.tolist(), time.tolist(), value.tolist(),
                                       strict=True)]
    return out


def values(rows: list[Row], **match: Any) -> dict[int, float]:
    """{step: value} of the rows whose fields equal `match`."""
    return {r.step: r.value for r in rows
            if all(getattr(r, k) == v for k, v in match.items())}
