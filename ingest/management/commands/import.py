"""`manage.py import` and `telescope import tensorboard|trackio|wandb PATH --project P [--run
NAME]` (help and options: ingest.management.arguments).

Each run of PATH is read whole before anything of it is stored, so a damaged one (a checksum
that does not match, a malformed database: `DamagedSource`) stores nothing; it is reported on
one line naming the file and where, the other runs are imported, and the command fails at the
end (exit status 1) naming what was not imported. A torn tail (a run still being written) is a
warning: its whole records are imported. No input ends in a traceback (`--traceback` shows
one for an unexpected error).
"""

from __future__ import annotations

import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from ingest.importers import SourceRun, find_runs
from ingest.importers.load import Imported, ImportRejected, import_run
from ingest.importers.source import DamagedSource
from ingest.management import arguments
from ingest.management.progress import Progress
from ingest.models import Project, Run


class Command(BaseCommand):
    help = arguments.IMPORT

    def add_arguments(self, parser: CommandParser) -> None:
        arguments.import_runs(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        source, path = options["source"], options["path"]
        try:
            runs = find_runs(source, path)
        except (OSError, ValueError) as exc:  # DamagedSource too: the runs cannot be listed
            raise CommandError(f"cannot read {source} runs at {path}: {exc}") from None
        if not runs:
            raise CommandError(f"no {source} runs found at {path}")
        if options["run"] and len(runs) > 1:
            names = ", ".join(repr(r.name) for r in runs)
            raise CommandError(f"{path} holds {len(runs)} runs ({names}); --run names one "
                               "run only: import them under their own names, or point PATH "
                               "at one")
        project, _ = Project.objects.get_or_create(name=options["project"])
        failed = [run.name for i, run in enumerate(runs, start=1)
                  if not self._import(source, run, options["run"] or run.name, project,
                                      options.get("traceback", False),
                                      f" ({i}/{len(runs)})" if len(runs) > 1 else "")]
        if failed:
            raise CommandError(f"{len(failed)} of {len(runs)} {source} runs not imported "
                               f"({', '.join(map(repr, failed))}): see the errors above")

    def _import(self, source: str, run: SourceRun, name: str, project: Project,
                traceback: bool, of: str) -> bool:
        """Import one run (`of`: which of how many); report it (stdout) or why it was not
        (stderr). Whether it was."""
        bar = Progress(f"{source} {run.name!r}{of}")
        bar.note("reading…")
        try:
            done = import_run(project.pk, run, name, progress=bar)
        except ModuleNotFoundError as exc:
            bar.clear()
            raise CommandError(f"reading {source} files needs the {exc.name!r} package: "
                               "pip install 'telescope-dashboard[import]'") from None
        except (DamagedSource, OSError) as exc:  # read whole before storing: nothing stored
            return self._failed(bar, f"{source} run {run.name!r} not imported: {exc}")
        except ImportRejected as exc:
            return self._failed(bar, f"{source} run {run.name!r}: {exc}; the messages before it "
                                "were stored")
        except Exception as exc:  # no input ends in a traceback: say what and where
            if traceback:
                raise
            return self._failed(bar, f"{source} run {run.name!r} not imported: unexpected "
                                f"{type(exc).__name__}: {exc} (--traceback shows where)")
        bar.close()
        for warning in run.warnings:
            sys.stderr.write(f"warning: {warning}\n")
        stored = (Run.objects.filter(pk=done.run_id).values_list("name", flat=True).first()
                  if done.run_id is not None else None)
        self.stdout.write(self._summary(source, run.name, stored or name, project.name,
                                        done, run.skipped))
        return True

    @staticmethod
    def _failed(bar: Progress, message: str) -> bool:
        bar.clear()
        sys.stderr.write(f"error: {message}\n")
        sys.stderr.flush()
        return False

    @staticmethod
    def _summary(source: str, original: str, name: str, project: str, done: Imported,
                 skipped: dict[str, int]) -> str:
        what = (f"{done.new_messages} new messages" if done.new_messages
                else "nothing new (imported before)")
        if done.new_messages and done.duplicate_messages:
            what += f", {done.duplicate_messages} already there"
        left_out = "; left out: " + ", ".join(
            f"{n} values ({why})" for why, n in sorted(skipped.items())) if skipped else ""
        return (f"Imported {source} run {original!r} as run {name!r} of project {project!r}: "
                f"{done.steps:,} steps, {what}, in {done.seconds:.2f} s "
                f"({done.steps_per_second:,.0f} steps/s){left_out}")
