from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from ingest.demo import demo_messages
from ingest.materialize import materialize_all
from ingest.models import Project, Run
from ingest.service import handle_object


class Command(BaseCommand):
    help = "Ingest a synthetic GRPO run (through the real ingest path) to look at."

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
        for i, msg in enumerate(demo_messages(options["run"], steps)):
            outcome = handle_object(project.pk, msg)
            if outcome.reply["type"] != "ack":
                raise CommandError(f"demo message rejected: {outcome.reply}")
            if i % 100 == 0:
                self.stdout.write(f"\rdemo: {i} messages", ending="")
                self.stdout.flush()
        materialize_all()
        self.stdout.write(f"\rdemo: run {options['run']!r} with {steps} steps in project "
                          f"{project.name!r}")
