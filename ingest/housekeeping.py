"""Renaming, annotating, recolouring and deleting runs (PROTOCOL.md §4 `PATCH` / `DELETE`).

A rename changes the name people see; trainers keep addressing the run by its wire name and
incarnation (ingest.runs), so a live run can be renamed. Deleting removes the run and all its
data in one transaction, table by table with plain SQL (the ORM's cascade would load every
point's key first).
"""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, connection, transaction

from ingest.models import Run
from trainer_hooks.protocol import ProtocolError, check_key

MAX_NOTES_CHARS = 20_000
# Children first: every table with rows of a run (directly, or through its series).
_BY_SERIES = ("ingest_seriescategory", "ingest_seriessnapshot")
_BY_RUN = ("ingest_point", "ingest_series", "ingest_samplebatch", "ingest_stepstate",
           "ingest_ingestedmessage", "ingest_environment", "ingest_observedrange",
           "ingest_runincarnation")


class EditError(ValueError):
    def __init__(self, field: str, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.field, self.message, self.status = field, message, status


def edit(run: Run, body: Any) -> None:
    """Apply `{"name", "notes", "color"}` (any of them); EditError names a bad field (409 for
    a name another run of the project has)."""
    if not isinstance(body, dict) or not body:
        raise EditError("body", "expected an object with name, notes or color")
    unknown = set(body) - {"name", "notes", "color"}
    if unknown:
        raise EditError(sorted(unknown)[0], "only name, notes and color can be changed")
    if "name" in body:
        try:
            run.name = check_key(body["name"], "name", kind="run name")
        except ProtocolError as exc:
            raise EditError("name", exc.message) from None
    if "notes" in body:
        notes = body["notes"]
        if not isinstance(notes, str) or len(notes) > MAX_NOTES_CHARS:
            raise EditError("notes", f"notes must be text of at most {MAX_NOTES_CHARS} chars")
        run.notes = notes
    if "color" in body:
        color = body["color"]
        if not (isinstance(color, str) and len(color) == 7 and color[0] == "#"
                and all(c in "0123456789abcdefABCDEF" for c in color[1:])):
            raise EditError("color", "color must look like #rrggbb")
        run.color = color
    try:
        with transaction.atomic():
            run.save(update_fields=[f for f in ("name", "notes", "color") if f in body])
    except IntegrityError:
        raise EditError("name", f"another run of the project is called {run.name!r}",
                        409) from None


def delete(run_id: int) -> bool:
    """Remove a run and everything stored for it; False when there is no such run."""
    with transaction.atomic(), connection.cursor() as cur:
        lock = " FOR UPDATE" if connection.features.has_select_for_update else ""
        cur.execute(f"SELECT id FROM ingest_run WHERE id = %s{lock}", [run_id])
        if cur.fetchone() is None:
            return False
        for table in _BY_SERIES:
            cur.execute(f"DELETE FROM {table} WHERE series_id IN"
                        " (SELECT id FROM ingest_series WHERE run_id = %s)", [run_id])
        for table in _BY_RUN:
            cur.execute(f"DELETE FROM {table} WHERE run_id = %s", [run_id])
        cur.execute("DELETE FROM ingest_run WHERE id = %s", [run_id])
    return True
