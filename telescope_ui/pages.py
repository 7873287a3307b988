"""HTML pages (docs/protocol.md "HTTP endpoints"). Their static files (modules, style sheets,
plotly.min.js) are served by ServeStatic under hashed names (telescope_ui.assets), linked with
`{% static %}`.

A run's page for a run that is not there (deleted: its tombstone says when; or never was)
answers 404 with a page that says so (`run_missing`), as does every other unknown URL under
`/runs/<id>` (`not_found`, the site's 404 handler); the JSON API's 404s stay JSON."""

from __future__ import annotations

import functools
import posixpath
import re
from pathlib import Path
from typing import Any

import orjson
from django.contrib.staticfiles import finders
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.safestring import SafeString, mark_safe
from django.views.decorators.csrf import ensure_csrf_cookie
from django.views.decorators.http import require_GET

from ingest.core.payloads import now
from ingest.models import DeletedRun, Run
from ingest.reads import catalog as reads
from ingest.reads import first_screen
from ingest.reads import timeline as timeline_reads
from telescope_ui.api import json_response
from telescope_ui.bundle import PREFIX as BUNDLE
from telescope_ui.layouts import DEFAULT, LayoutError, clean_name, layout_of

# A static import by relative path: `import ... from './x.js'`, `import '../vendor/y.js'`.
IMPORT = re.compile(r"""^\s*import\s[^'"]*?['"](\.\.?/[\w./-]+\.js)['"]""", re.M)


def _imported_modules(entry: str) -> list[str]:
    """`entry` and every module it imports, transitively, as static names (`js/x.js`,
    `vendor/sortablejs/sortable.esm.js`): what a page's module graph needs, and nothing else.
    Read from the sources the static files are collected from (the same finders)."""
    seen, todo = [entry], [entry]
    while todo:
        name = todo.pop()
        if name.startswith("vendor/"):  # npm's files import none of ours: named, not read
            continue  # (so the URLs load in a checkout without `npm ci`: telescope_ui.assets)
        source = finders.find(name)
        if source is None:
            raise LookupError(f"static file {name!r} not found (imported by the page's modules)")
        for url in IMPORT.findall(Path(source).read_text()):
            target = posixpath.normpath(posixpath.join(posixpath.dirname(name), url))
            if target not in seen:
                seen.append(target)
                todo.append(target)
    return seen


@functools.cache
def metrics_modules(view: str) -> list[str]:
    """The Metrics page's ES modules, preloaded (under their hashed names) so the browser
    fetches them at once rather than discovering them import by import: its bundle (telescope_ui.
    bundle: the entry and the chunk it imports); on the Custom view's page also that view's,
    which the entry imports only for it (`import()`). Read when first asked for: the bundle is
    built by what reads static files (Django's other commands work without esbuild)."""
    page = _imported_modules(f"{BUNDLE}/metrics.js")
    if view != "custom":
        return page
    return page + [m for m in _imported_modules(f"{BUNDLE}/custom/view.js") if m not in page]


# The sample viewer's, likewise (telescope_ui.samples).
SAMPLES_MODULES = _imported_modules("js/samples.js")
# The Timeline's and the Performance page's, likewise.
TIMELINE_MODULES = _imported_modules("js/timeline.js")
PERFORMANCE_MODULES = _imported_modules("js/performance.js")
# Its style sheets beside the site's app.css: one per feature of the charts.
METRICS_STYLESHEETS = [f"css/{name}.css" for name in ("charts", "heatmap", "health", "custom")]


@require_GET
@ensure_csrf_cookie
def runs_page(request: HttpRequest) -> HttpResponse:
    return render(request, "runs.html")


@require_GET
@ensure_csrf_cookie
def metrics_page(request: HttpRequest, run_id: int) -> HttpResponse:
    run = find_run(run_id)
    if run is None:
        return run_missing(request, run_id)
    view = "custom" if request.GET.get("view") == "custom" else "all"
    # The catalog rides along with the page: the charts can be laid out without a round trip;
    # and in the All view the first screen's series (ingest.reads.first_screen): its charts
    # are drawn without a series request.
    catalog = reads.catalog(run)
    first = None if view == "custom" else embedded_json(first_screen.shared_axes(
        first_screen.first_screen(run.pk, catalog["series"], points_hint(request))), "run-series")
    context = {"run": run, "view": view, "run_info": reads.run_detail(run),
               "catalog": catalog, "first_series": first,
               "modules": metrics_modules(view), "entry": f"{BUNDLE}/metrics.js",
               "stylesheets": METRICS_STYLESHEETS,
               "layout": layout_of(run, _dashboard(request)) if view == "custom" else None}
    return render(request, "metrics.html", context)


# The points per trace the page asks for depend on its width (static/js/metrics.js
# measurePoints: 400 to 2000, in steps of 400); the page keeps its last figure in this cookie.
# Without it, the figure of most widths (800); a run of fewer steps is sent whole, which any
# width takes as it is.
POINTS_COOKIE = "telescope_points"
DEFAULT_PAGE_POINTS = 800
PAGE_POINTS = (400, 2000)  # measurePoints' bounds


def points_hint(request: HttpRequest) -> int:
    try:
        points = int(request.COOKIES.get(POINTS_COOKIE, DEFAULT_PAGE_POINTS))
    except ValueError:
        return DEFAULT_PAGE_POINTS
    return min(max(points, PAGE_POINTS[0]), PAGE_POINTS[1])


# JSON inside <script>: the characters that could end the element or open a comment are
# written as escapes (as django.utils.html.json_script does), which JSON reads back the same.
_SCRIPT_ESCAPES = {ord("<"): "\\u003C", ord(">"): "\\u003E", ord("&"): "\\u0026"}


def embedded_json(data: Any, element_id: str) -> SafeString:
    """`data` as a non-executable `<script type="application/json">` (the page's CSP allows no
    inline script; its module reads the element's text). orjson, as the read API: the series'
    numpy arrays serialize directly."""
    text = orjson.dumps(data, option=orjson.OPT_SERIALIZE_NUMPY).decode().translate(
        _SCRIPT_ESCAPES)
    return mark_safe(f'<script id="{element_id}" type="application/json">{text}</script>')


@require_GET
def timeline_page(request: HttpRequest, run_id: int) -> HttpResponse:
    """The Gantt of a window of the run's events (`?start=&end=`, unix seconds; without them
    the newest events): static/js/timeline.js reads the window through the read API."""
    run = find_run(run_id)
    if run is None:
        return run_missing(request, run_id)
    context = {"run": run, "run_info": reads.run_detail(run), "modules": TIMELINE_MODULES,
               "extent": _event_extent(run)["extent"], "page": "Timeline", "tab": "timeline"}
    return render(request, "timeline.html", context)


@require_GET
def performance_page(request: HttpRequest, run_id: int) -> HttpResponse:
    """The run's time buckets (`?bucket=` seconds) and its gauges: static/js/performance.js."""
    run = find_run(run_id)
    if run is None:
        return run_missing(request, run_id)
    context = {"run": run, "run_info": reads.run_detail(run), "modules": PERFORMANCE_MODULES,
               "timeline": _event_extent(run), "page": "Performance", "tab": "performance"}
    return render(request, "performance.html", context)


def _event_extent(run: Run) -> dict[str, Any]:
    """What the run has sent of events and gauges, for the pages' first draw: the event
    extent ([first, last], null when none) and how many events and gauge points are stored."""
    st = timeline_reads.state(run.pk)
    if st is None:
        return {"extent": None, "events": 0, "gauges": 0}
    extent = [st.first, st.last] if st.events and st.first is not None else None
    return {"extent": extent, "events": st.events, "gauges": st.gauges}


def _dashboard(request: HttpRequest) -> str:
    """The Custom view dashboard asked for (`?dashboard=`), the default one if unusable."""
    try:
        return clean_name(request.GET.get("dashboard", DEFAULT))
    except LayoutError:
        return DEFAULT


# ---------------------------------------------------------------- a run that is not there

RUN_PATH = re.compile(r"^/(api/)?runs/(\d{1,18})(/|$)")


def find_run(run_id: int) -> Run | None:
    return Run.objects.select_related("project").filter(pk=run_id).first()


def run_missing(request: HttpRequest, run_id: int) -> HttpResponse:
    """404, with a page saying that the run was deleted (its name, project and when, and the
    run that has its name now, if any) or that there never was such a run."""
    tomb = DeletedRun.objects.select_related("project").filter(pk=run_id).first()
    successor = None if tomb is None else (
        Run.objects.filter(project_id=tomb.project_id, name=tomb.name).order_by("-pk").first())
    recent = tomb is not None and (now() - tomb.deleted_at).total_seconds() < 60
    context = {"run_id": run_id, "deleted": tomb, "successor": successor, "just_now": recent}
    return render(request, "run_missing.html", context, status=404)


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """The site's 404 (urls.handler404): JSON under /api/ (`{"error"}`: which run is missing,
    and since when it is deleted), the missing run's page under /runs/<id>, else a page in the
    site's style."""
    match = RUN_PATH.match(request.path)
    run_id = int(match.group(2)) if match else 0
    gone = match is not None and not Run.objects.filter(pk=run_id).exists()
    if request.path.startswith("/api/"):
        if not gone:
            return json_response({"error": "not found"}, status=404)
        tomb = DeletedRun.objects.filter(pk=run_id).first()
        if tomb is None:
            return json_response({"error": f"no run {run_id}"}, status=404)
        return json_response({"error": f"run {run_id} was deleted",
                              "deleted_at": tomb.deleted_at.isoformat()}, status=404)
    if gone:
        return run_missing(request, run_id)
    return render(request, "not_found.html", {"path": request.path}, status=404)
