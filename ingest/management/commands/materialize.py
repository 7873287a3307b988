from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from ingest.materialize import dirty_runs, materialize_all


class Command(BaseCommand):
    help = "Re-aggregate every step marked dirty (normally the server does this by itself)."

    def handle(self, *args: Any, **options: Any) -> None:
        runs = dirty_runs()
        for run_id in runs:
            outcomes = materialize_all(run_id)
            self.stdout.write(f"run {run_id}: {len(outcomes)} pass(es)")
        self.stdout.write(f"{len(runs)} run(s) materialized")
