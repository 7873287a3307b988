from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from django.core.management.base import BaseCommand

from ingest.management.progress import Progress
from ingest.models import Run
from ingest.pipeline.materialize import dirty_runs, materialize_all
from ingest.reads.catalog import pending_steps


class Command(BaseCommand):
    help = "Re-aggregate every step marked dirty (normally the server does this by itself)."

    def handle(self, *args: Any, **options: Any) -> None:
        runs = materialize_dirty(self.stdout.write)
        self.stdout.write(f"{runs} run(s) materialized")


def materialize_dirty(say: Callable[[str], Any] = lambda _: None, label: str = "") -> int:
    """Aggregate every dirty step of every run now, with progress on stderr (`label` before
    each run's); `say` gets a line per run before and after. How many runs."""
    runs = dirty_runs()
    names = dict(Run.objects.filter(pk__in=runs).values_list("pk", "name"))
    for run_id in runs:
        name = f"run {names.get(run_id, '?')!r} (id {run_id})"
        total = pending_steps(run_id)
        say(f"{name}: {total} step(s) to aggregate")
        started = time.monotonic()
        with Progress(f"{label}{name}: aggregating", total) as progress:
            materialize_all(run_id, progress=_steps_done(progress, total))
        say(f"{name}: done in {time.monotonic() - started:.1f} s")
    return len(runs)


def _steps_done(progress: Progress, total: int) -> Callable[[int, int], None]:
    """materialize_all's `progress(run_id, steps_left)` as steps done of `total`."""
    return lambda _, left: progress.update(max(0, total - left))
