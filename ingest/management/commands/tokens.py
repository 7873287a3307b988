from __future__ import annotations

from datetime import datetime
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from ingest.models import Project, Token
from ingest.write import auth

COLUMNS = ("prefix", "project", "created", "last used", "state")


def when(moment: datetime | None) -> str:
    return f"{moment:%Y-%m-%d %H:%M}Z" if moment is not None else "-"


def table(tokens: list[Token]) -> list[str]:
    """One line per token, in columns; never the token itself (only its digest is stored)."""
    rows = [COLUMNS] + [(t.prefix, t.project.name, when(t.created_at), when(t.last_used_at),
                         "revoked" if t.revoked else "active") for t in tokens]
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
            for row in rows]


class Command(BaseCommand):
    help = ("List the ingest tokens (their prefixes, never the tokens) or revoke one by its "
            "prefix. A revoked token is refused at once; connections open with it are closed "
            f"within {auth.REVOCATION_CHECK_SECONDS:.0f} s.")

    def add_arguments(self, parser: CommandParser) -> None:
        what = parser.add_mutually_exclusive_group(required=True)
        what.add_argument("--list", action="store_true",
                          help="list the tokens: prefix, project, created, last used, state")
        what.add_argument("--revoke", metavar="PREFIX",
                          help="revoke the one token whose prefix (as --list shows it, at "
                          f"least {auth.MIN_PREFIX} characters) or whole value this is")
        parser.add_argument("--project", help="with --list: only this project's tokens")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["revoke"] is not None:
            if options["project"]:
                raise CommandError("--project goes with --list, not --revoke")
            self.revoke_one(options["revoke"])
        else:
            self.show(options["project"])

    def show(self, project: str | None) -> None:
        tokens = Token.objects.select_related("project").order_by("project__name", "created_at")
        if project is not None:
            if not Project.objects.filter(name=project).exists():
                raise CommandError(f"no project {project!r}")
            tokens = tokens.filter(project__name=project)
        found = list(tokens)
        if not found:
            self.stdout.write(f"No tokens{f' for project {project!r}' if project else ''}.")
            return
        for line in table(found):
            self.stdout.write(line)

    def revoke_one(self, prefix: str) -> None:
        try:
            token = auth.revoke(prefix)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        name = f"Token {token.prefix} of project {token.project.name!r}"
        if token.revoked:
            self.stdout.write(f"{name} was already revoked.")
            return
        self.stdout.write(f"{name} revoked: refused from now on; connections open with it "
                          f"are closed within {auth.REVOCATION_CHECK_SECONDS:.0f} s.")
