"""The run overview page (`/runs/<id>`): how far a run is, its headline charts, its
config and environments, its notes, and its housekeeping (rename, notes, colour, delete).

The page carries the run's info (with its config) and catalog, so it draws without a round
trip; static/js/overview.js does the rest through the read API and `/ws/live/`.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.csrf import ensure_csrf_cookie
from django.views.decorators.http import require_GET

from ingest.reads import catalog as reads
from telescope_ui.pages import find_run, run_missing


@require_GET
@ensure_csrf_cookie  # the housekeeping controls write with it (PATCH / DELETE /api/runs/<id>)
def overview_page(request: HttpRequest, run_id: int) -> HttpResponse:
    run = find_run(run_id)
    if run is None:
        return run_missing(request, run_id)  # deleted (when, by its tombstone), or never was
    context = {"run": run, "run_info": reads.run_detail(run), "catalog": reads.catalog(run)}
    return render(request, "overview.html", context)
