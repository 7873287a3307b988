"""How runs and series are shown: the shapes the read API serves and live pages receive, shared
by the write path (which broadcasts them) and the read path (which serves them)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from ingest.core import progress
from ingest.core.normalize import PREFIX as NORM_PREFIX
from ingest.core.series_ids import placement
from ingest.models import Run


def now() -> datetime:
    return datetime.now(UTC)


def catalog_entry(sid: str, kind: str, key: str, stat: str | None, env: str | None,
                  categorical: bool = False) -> dict[str, Any]:
    """A series as the catalog lists it. A normalized series (stored with stat
    `norm:<stat>`) is listed with its plain stat and `normalized: true`, beside its raw twin."""
    extra: dict[str, Any] = {}
    if stat is not None and stat.startswith(NORM_PREFIX):
        stat, extra["normalized"] = stat[len(NORM_PREFIX):], True
    if categorical:
        extra["categorical"] = True
    return {"id": sid, "kind": kind, "key": key, "stat": stat, "env": env,
            **placement(kind, key, stat, env), **extra}


def run_info(run: Run) -> dict[str, Any]:
    """A run as the read API lists it (docs/protocol.md "Runs")."""
    status = progress.status_of(run.status, run.updated_at, run.last_seen, now())
    done = progress.steps_done(run.first_step, run.last_step)
    return {
        "id": run.pk,
        "project": getattr(run, "project_name", None) or run.project.name,
        "name": run.name,
        "status": status,
        "last_step": run.last_step,
        "started_at": run.started_at.isoformat(),
        "updated_at": run.updated_at.isoformat(),
        "color": run.color,
        "notes": run.notes,
        "tags": run.tags,
        "total_steps": run.total_steps,
        "first_step": run.first_step,
        "steps_done": done,
        "eta_seconds": progress.eta_seconds(status, run.total_steps, done, run.step_seconds),
    }
