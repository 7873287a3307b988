from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand

from ingest.models import Run
from ingest.pipeline.materialize import dirty_runs, materialize_all
from ingest.reads.catalog import pending_steps

PROGRESS_SECONDS = 1.0


class Command(BaseCommand):
    help = "Re-aggregate every step marked dirty (normally the server does this by itself)."

    def handle(self, *args: Any, **options: Any) -> None:
        runs = dirty_runs()
        names = dict(Run.objects.filter(pk__in=runs).values_list("pk", "name"))
        for run_id in runs:
            label = f"run {names.get(run_id, '?')!r} (id {run_id})"
            total = pending_steps(run_id)
            self.stdout.write(f"{label}: {total} step(s) to aggregate")
            started = last = time.monotonic()

            def progress(rid: int, left: int, label: str = label, total: int = total) -> None:
                nonlocal last
                now = time.monotonic()
                if left and now - last >= PROGRESS_SECONDS:
                    done = max(0, total - left)
                    self.stdout.write(f"{label}: {done}/{total} steps, {left} left")
                    last = now

            materialize_all(run_id, progress=progress)
            self.stdout.write(f"{label}: done in {time.monotonic() - started:.1f} s")
        self.stdout.write(f"{len(runs)} run(s) materialized")
