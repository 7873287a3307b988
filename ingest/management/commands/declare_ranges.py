from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from django.core.management.base import BaseCommand, CommandError, CommandParser

from ingest.models import Run
from ingest.write.store import replace_environments
from trainer_hooks.rewards.ranges import config_entries
from trainer_hooks.wire.protocol import ProtocolError, parse_environments


class Command(BaseCommand):
    help = ("Apply the `environments:` list of a YAML file (reward and metric ranges) to a run: "
            "this product's entries or Telescope's run config as it is (docs/protocol.md, "
            "Environment declarations).")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", required=True, help="the run's project")
        parser.add_argument("--run", required=True, help="the run's name")
        parser.add_argument("--strict", action="store_true",
                            help="refuse the file when an entry has an unknown key (a typo "
                                 "such as reward_minimum); without it, unknown keys are named "
                                 "in a warning and ignored")
        parser.add_argument("file", type=Path,
                            help="a YAML file with a top-level `environments:` list")

    def handle(self, *args: Any, **options: Any) -> None:
        path: Path = options["file"]
        try:
            doc = yaml.safe_load(path.read_text())
        except OSError as exc:
            raise CommandError(f"cannot read {path}: {exc.strerror}") from None
        except yaml.YAMLError as exc:
            raise CommandError(f"{path} is not valid YAML: {exc}") from None
        if not isinstance(doc, dict) or "environments" not in doc:
            raise CommandError(f"{path} has no top-level 'environments:' list")
        entries, warnings = config_entries(doc["environments"], "environments")
        if warnings and options["strict"]:
            raise CommandError(f"{path}: " + f"\n{path}: ".join(warnings))
        for warning in warnings:
            self.stderr.write(f"warning: {path}: {warning}")
        try:
            envs = parse_environments(entries, "environments")
        except ProtocolError as exc:
            raise CommandError(f"{path}: {exc.field}: {exc.message}") from None
        run = Run.objects.filter(project__name=options["project"], name=options["run"]).first()
        if run is None:
            raise CommandError(f"no run {options['run']!r} in project {options['project']!r}")
        changed = replace_environments(run, envs)
        names = ", ".join(e.name for e in envs) or "none"
        self.stdout.write(f"Declared {len(envs)} environment(s) on run {run.name!r}: {names}")
        if changed:
            self.stdout.write("Steps with samples will be re-aggregated with the new ranges by "
                              "the running server (or now: manage.py materialize).")
