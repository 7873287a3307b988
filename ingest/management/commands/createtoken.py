from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from ingest.write.auth import create_token


class Command(BaseCommand):
    help = "Create an ingest token for a project (creating the project if needed)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", required=True, help="project name")

    def handle(self, *args: Any, **options: Any) -> None:
        project, token = create_token(options["project"])
        self.stdout.write(f"New ingest token for project {project.name!r} "
                          "(shown once; store it now):")
        self.stdout.write(token)
