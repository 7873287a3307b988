"""Renaming, annotating, recolouring and deleting runs (docs/protocol.md "One run").

A rename changes the name people see; trainers keep addressing the run by its wire name and
incarnation (ingest.write.runs), so a live run can be renamed. Deleting removes the run and all its
data in one transaction, table by table with plain SQL (the ORM's cascade would load every
point's key first); which tables, the models' relations say (`deletion_plan`).

A deleted run leaves a tombstone (`DeletedRun`: its id, project, name and when), written in the
same transaction, so its old URLs and open pages can say what became of it (`deleted_info`).

After commit, live pages watching the run hear of it (`/ws/live/` `run` message, best effort):
an edit sends the run's new info, a delete `deleted_info` (`{"id", "deleted": true, "project",
"name", "deleted_at"}`). A page that misses the message learns it from the database
(telescope_ui.live watches its runs' rows).
"""

from __future__ import annotations

import functools
import logging
from typing import Any

from asgiref.sync import async_to_sync
from django.apps import apps
from django.db import IntegrityError, connection, models, transaction

from ingest.core import broadcast
from ingest.core.commit import Outcome
from ingest.core.payloads import now, run_info
from ingest.models import DeletedRun, Run
from trainer_hooks.wire.protocol import ProtocolError, check_key
from trainer_hooks.wire.schema import deceptive, shown

log = logging.getLogger(__name__)
MAX_NOTES_CHARS = 20_000
MAX_TAGS = 32
MAX_TAG_CHARS = 64
EDITABLE = ("name", "notes", "color", "tags")


class EditError(ValueError):
    def __init__(self, field: str, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.field, self.message, self.status = field, message, status


def clean_tags(value: Any) -> list[str]:
    """A run's tags as stored: distinct, sorted. Each is 1–MAX_TAG_CHARS characters under the
    one rule for names (trainer_hooks.wire.schema.deceptive: no control, format or invisible
    character), without leading or trailing spaces; EditError names the bad one (`tags[i]`)."""
    if not isinstance(value, list):
        raise EditError("tags", "tags must be a list of strings")
    if len(value) > MAX_TAGS:
        raise EditError("tags", f"at most {MAX_TAGS} tags ({len(value)} given)")
    for i, tag in enumerate(value):
        field = f"tags[{i}]"
        if not isinstance(tag, str):
            raise EditError(field, "a tag must be a string")
        if not tag.strip() or len(tag) > MAX_TAG_CHARS:
            raise EditError(field, f"a tag has 1–{MAX_TAG_CHARS} characters")
        if tag != tag.strip():
            raise EditError(field, f"tag {tag!r} must not start or end with a space")
        bad = deceptive(tag)
        if bad is not None:
            raise EditError(field, f"tag {tag!r} contains a control or invisible character "
                            f"({shown(bad)})")
    return sorted(set(value))


def edit(run: Run, body: Any) -> None:
    """Apply `{"name", "notes", "color", "tags"}` (any of them); EditError names a bad field
    (409 for a name another run of the project has)."""
    if not isinstance(body, dict) or not body:
        raise EditError("body", "expected an object with name, notes, color or tags")
    unknown = set(body) - set(EDITABLE)
    if unknown:
        raise EditError(sorted(unknown)[0], "only name, notes, color and tags can be changed")
    if "name" in body:
        try:
            name = check_key(body["name"], "name", kind="run name")
        except ProtocolError as exc:
            raise EditError("name", exc.message) from None
        if name != name.strip():  # "  " or "x " would look like another run's name
            raise EditError("name", "run name must not start or end with a space")
        run.name = name
    if "notes" in body:
        notes = body["notes"]
        if not isinstance(notes, str) or len(notes) > MAX_NOTES_CHARS:
            raise EditError("notes", f"notes must be text of at most {MAX_NOTES_CHARS} chars")
        if "\x00" in notes:  # PostgreSQL text cannot hold it (a 500 there): refused everywhere
            raise EditError("notes", "notes must not contain a NUL character")
        run.notes = notes
    if "color" in body:
        color = body["color"]
        if not (isinstance(color, str) and len(color) == 7 and color[0] == "#"
                and all(c in "0123456789abcdefABCDEF" for c in color[1:])):
            raise EditError("color", "color must look like #rrggbb")
        run.color = color
    if "tags" in body:
        run.tags = clean_tags(body["tags"])
    try:
        with transaction.atomic():
            run.save(update_fields=[f for f in EDITABLE if f in body])
    except IntegrityError:
        raise EditError("name", f"another run of the project is called {run.name!r}",
                        409) from None
    announce(run.pk, run_info(run))


def delete(run_id: int) -> bool:
    """Remove a run and everything stored for it, leaving its tombstone; False when there is
    no such run."""
    with transaction.atomic(), connection.cursor() as cur:
        lock = " FOR UPDATE" if connection.features.has_select_for_update else ""
        cur.execute(f"SELECT project_id, name FROM ingest_run WHERE id = %s{lock}", [run_id])
        row = cur.fetchone()
        if row is None:
            return False
        for table, where in deletion_plan():
            cur.execute(f"DELETE FROM {table} WHERE {where}", [run_id])
        cur.execute("DELETE FROM ingest_run WHERE id = %s", [run_id])
        tomb, _ = DeletedRun.objects.update_or_create(
            id=run_id, defaults={"project_id": row[0], "name": row[1], "deleted_at": now()})
    announce(run_id, tombstone_info(tomb))
    return True


def deleted_info(run_id: int) -> dict[str, Any] | None:
    """What pages are told of a deleted run (see the module docstring); None when the run was
    never deleted (it exists, or never did)."""
    tomb = DeletedRun.objects.select_related("project").filter(pk=run_id).first()
    return None if tomb is None else tombstone_info(tomb)


def tombstone_info(tomb: DeletedRun) -> dict[str, Any]:
    return {"id": tomb.pk, "deleted": True, "project": tomb.project.name, "name": tomb.name,
            "deleted_at": tomb.deleted_at.isoformat()}


@functools.cache
def deletion_plan() -> list[tuple[str, str]]:
    """(table, condition on the run id) of every table holding rows of a run, children first,
    read from the models' relations: directly (a `run` field, with or without a database
    constraint) or through a parent that does (a series' snapshot). A new table of run data is
    covered without a change here."""
    qn = connection.ops.quote_name
    where: dict[type[models.Model], str] = {Run: "id = %s"}
    found: list[type[models.Model]] = []
    pending = [m for m in apps.get_models() if m is not Run and m._meta.managed
               and not m._meta.proxy]
    while True:
        for model in pending:
            links = [f for f in model._meta.concrete_fields
                     if f.is_relation and f.related_model in where]
            if not links:
                continue
            link = next((f for f in links if f.related_model is Run), links[0])
            parent = link.related_model
            assert isinstance(parent, type) and issubclass(parent, models.Model)
            pk = parent._meta.pk
            assert link.column is not None and pk is not None and pk.column is not None
            where[model] = f"{qn(link.column)} = %s" if parent is Run else (
                f"{qn(link.column)} IN (SELECT {qn(pk.column)} FROM "
                f"{qn(parent._meta.db_table)} WHERE {where[parent]})")
            found.append(model)
            pending.remove(model)
            break
        else:
            return [(qn(m._meta.db_table), where[m]) for m in reversed(found)]


def announce(run_id: int, info: dict[str, Any]) -> None:
    """Publish `info` to the pages watching the run once the current transaction commits (at
    once outside one). Best effort, like every broadcast: a page that misses it catches up on
    its next poll of the read API."""
    def send() -> None:
        try:
            async_to_sync(broadcast.publish)(Outcome(reply={}, run_id=run_id, run=info))
        except RuntimeError as exc:  # called on an event loop's own thread: nobody to wait
            log.warning("run %s: live pages not told of the change (%s)", run_id, exc)
    transaction.on_commit(send)
