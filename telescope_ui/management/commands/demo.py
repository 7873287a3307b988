"""`manage.py demo`: a finished synthetic GRPO run to look at (`make run` streams a live one
beside it: telescope_ui.live_demo)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from ingest.core.series_ids import series_id
from ingest.models import Project, Run
from ingest.pipeline.materialize import materialize_all
from ingest.write.demo import demo_messages
from ingest.write.frames import handle_objects
from telescope_ui.models import Layout

BATCH = 500  # messages per transaction

# The Custom view a newcomer finds for the demo project: the charts one looks at first.
STARTER_CHARTS: list[dict[str, Any]] = [
    {"id": series_id("reward", "reward", "mean"), "wide": True},
    {"id": series_id("step", "entropy")},
    {"id": series_id("step", "kl_divergence_inference")},
    {"id": series_id("step", "grad_norm")},
    {"id": series_id("groups", "groups", "informative")},
    {"id": series_id("rollouts", "completion_tokens", "mean")},
    {"id": series_id("step", "timing_step_total")},
]


class Command(BaseCommand):
    help = ("Ingest a synthetic GRPO run (through the real ingest path) to look at, and give its "
            "project a starter Custom view.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", default="demo")
        parser.add_argument("--run", default="grpo-demo")
        parser.add_argument("--steps", type=int, default=200)
        parser.add_argument("--if-empty", action="store_true",
                            help="do nothing when any run exists already")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["if_empty"] and Run.objects.exists():
            return
        project, _ = Project.objects.get_or_create(name=options["project"])
        steps = options["steps"]
        batch: list[dict[str, Any]] = []
        for i, msg in enumerate(finished_run(options["run"], steps), start=1):
            batch.append(msg)
            if len(batch) == BATCH:
                self._apply(project.pk, batch)
                batch = []
                self.stdout.write(f"\rdemo: {i} messages", ending="")
                self.stdout.flush()
        self._apply(project.pk, batch)
        materialize_all(progress=lambda _, left: self._progress(left))
        Layout.objects.get_or_create(project=project, name="default", defaults={
            "charts": [{"wide": False, "settings": {}, **c} for c in STARTER_CHARTS]})
        self.stdout.write(f"\rdemo: run {options['run']!r} with {steps} steps in project "
                          f"{project.name!r}")

    def _apply(self, project_id: int, batch: list[dict[str, Any]]) -> None:
        for outcome in handle_objects(project_id, batch):  # one transaction per batch
            if outcome.reply["type"] != "ack":
                raise CommandError(f"demo message rejected: {outcome.reply}")

    def _progress(self, left: int) -> None:
        self.stdout.write(f"\rdemo: aggregating, {left} steps left ", ending="")
        self.stdout.flush()


def finished_run(run: str, steps: int) -> Iterator[dict[str, Any]]:
    """ingest.write.demo's messages, its run.start saying how many steps there will be (progress),
    then a `run.end`: the demo run is `finished`, not `running` until it turns idle."""
    end: dict[str, Any] = {"v": 1, "id": f"{run}-end", "type": "run.end", "run": run,
                           "status": "finished"}
    for msg in demo_messages(run, steps):
        if msg["type"] == "run.start":
            msg = {**msg, "total_steps": steps}
        elif msg["type"] == "step":
            end["time"] = msg["time"]
        yield msg
    yield end
