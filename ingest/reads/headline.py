"""The run list's headline column: the latest point of one series (by its catalog id, the same
in every run) of each listed run (docs/protocol.md "Runs")."""

from __future__ import annotations

from typing import Any

from django.db import connection

from ingest.core import categorical
from ingest.core.series_ids import series_id
from ingest.reads import catalog

DEFAULT = series_id("reward", "reward", "mean", None)  # the reward's mean over all environments


def latest(run_ids: list[int], sid: str) -> dict[int, dict[str, Any]]:
    """{run id: {"step", "value"}} of the runs whose series `sid` has a point (its last one;
    a categorical series' value is its string)."""
    if not run_ids:
        return {}
    marks = ", ".join(["%s"] * len(run_ids))
    with connection.cursor() as cur:
        cur.execute(f"SELECT run_id, id, categorical FROM ingest_series WHERE sid = %s"
                    f" AND run_id IN ({marks})", [sid, *run_ids])
        rows = cur.fetchall()
    tables = categorical.texts([pk for _, pk, text in rows if text])
    out: dict[int, dict[str, Any]] = {}
    for run_id, pk, _ in rows:
        _, arrays = catalog.CACHE.get(run_id, [pk])
        step, _, value = arrays[pk]
        if not step.size:
            continue
        last = value[-1:]
        shown = categorical.decode(last, tables[pk])[0] if pk in tables else float(last[0])
        out[run_id] = {"step": int(step[-1]), "value": shown}
    return out
