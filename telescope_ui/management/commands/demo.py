"""`manage.py demo` and `telescope demo` (help and options: ingest.management.arguments): a
finished synthetic GRPO run to look at (`make run` streams a live one
beside it: telescope_ui.live_demo)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from ingest.core.series_ids import series_id
from ingest.management import arguments
from ingest.management.commands.materialize import materialize_dirty
from ingest.management.progress import Progress
from ingest.models import Project, Run
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
    help = arguments.DEMO

    def add_arguments(self, parser: CommandParser) -> None:
        arguments.demo(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        if options["if_empty"] and Run.objects.exists():
            return
        project, _ = Project.objects.get_or_create(name=options["project"])
        steps = options["steps"]
        batch: list[dict[str, Any]] = []
        stepped = 0  # steps sent so far
        with Progress("demo: ingesting", steps) as ingesting:
            for msg in finished_run(options["run"], steps):
                batch.append(msg)
                stepped = msg["step"] + 1 if msg["type"] == "step" else stepped
                if len(batch) == BATCH:
                    self._apply(project.pk, batch)
                    batch = []
                    ingesting.update(stepped)
            self._apply(project.pk, batch)
            ingesting.update(steps)
        materialize_dirty(label="demo: ")
        Layout.objects.get_or_create(project=project, name="default", defaults={
            "charts": [{"wide": False, "settings": {}, **c} for c in STARTER_CHARTS]})
        self.stdout.write(f"demo: run {options['run']!r} with {steps} steps in project "
                          f"{project.name!r}")

    def _apply(self, project_id: int, batch: list[dict[str, Any]]) -> None:
        for outcome in handle_objects(project_id, batch):  # one transaction per batch
            if outcome.reply["type"] != "ack":
                raise CommandError(f"demo message rejected: {outcome.reply}")


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
