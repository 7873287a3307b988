"""`manage.py declare_ranges` and `telescope declare-ranges` (help and options:
ingest.management.arguments)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from django.core.management.base import BaseCommand, CommandError, CommandParser

from ingest.management import arguments
from ingest.management.progress import Progress
from ingest.models import Run
from ingest.write.store import replace_environments
from trainer_hooks.rewards.ranges import IGNORED, STRICT, config_entries
from trainer_hooks.wire.protocol import ProtocolError, parse_environments
from trainer_hooks.wire.schema import MAX_ENVIRONMENTS, EnvironmentDecl


class Command(BaseCommand):
    help = arguments.DECLARE_RANGES

    def add_arguments(self, parser: CommandParser) -> None:
        arguments.declare_ranges(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        files: list[Path] = options["file"]
        envs: list[EnvironmentDecl] = []
        declared_in: dict[str, Path] = {}
        # Progress only for several files: one file's line would say nothing.
        progress = Progress("declare-ranges", len(files), "files") if len(files) > 1 else None
        for done, path in enumerate(files, start=1):
            for env in self._read(path, options["strict"], progress):
                if env.name in declared_in:
                    raise CommandError(f"{path}: environment {env.name!r} is declared in "
                                       f"{declared_in[env.name]} too")
                declared_in[env.name] = path
                envs.append(env)
            if progress is not None:
                progress.update(done)
        if progress is not None:
            progress.close()
        if len(envs) > MAX_ENVIRONMENTS:
            raise CommandError(f"environments: {len(envs)} environments in the files "
                               f"together, more than {MAX_ENVIRONMENTS}")
        run = Run.objects.filter(project__name=options["project"], name=options["run"]).first()
        if run is None:
            raise CommandError(f"no run {options['run']!r} in project {options['project']!r}")
        changed = replace_environments(run, envs)
        names = ", ".join(e.name for e in envs) or "none"
        self.stdout.write(f"Declared {len(envs)} environment(s) on run {run.name!r}: {names}")
        if changed:
            self.stdout.write("Steps with samples will be re-aggregated with the new ranges by "
                              "the server in the background (now if it is running, else when "
                              "it starts).")

    def _read(self, path: Path, strict: bool,
              progress: Progress | None) -> list[EnvironmentDecl]:
        """The environments file `path` declares; an error naming the file and the field."""
        try:
            doc = yaml.safe_load(path.read_text())
        except OSError as exc:
            raise CommandError(f"cannot read {path}: {exc.strerror}") from None
        except yaml.YAMLError as exc:
            raise CommandError(f"{path} is not valid YAML: {exc}") from None
        if not isinstance(doc, dict) or "environments" not in doc:
            raise CommandError(f"{path} has no top-level 'environments:' list")
        entries, warnings = config_entries(doc["environments"], "environments",
                                           STRICT if strict else IGNORED)
        if warnings and strict:  # an error naming each key and this file: nothing declared
            raise CommandError(f"{path}: " + f"\n{path}: ".join(warnings))
        if warnings and progress is not None:
            progress.clear()
        for warning in warnings:
            self.stderr.write(f"warning: {path}: {warning}")
        try:
            return parse_environments(entries, "environments")
        except ProtocolError as exc:
            raise CommandError(f"{path}: {exc.field}: {exc.message}") from None
