"""HTML pages (docs/protocol.md "HTTP endpoints"). Their static files (modules, style sheets,
plotly.min.js) are served by ServeStatic under hashed names (telescope_ui.assets), linked with
`{% static %}`."""

from __future__ import annotations

import posixpath
import re
from pathlib import Path

from django.contrib.staticfiles import finders
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.csrf import ensure_csrf_cookie
from django.views.decorators.http import require_GET

from ingest import reads
from ingest.models import Run
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
        source = finders.find(name)
        if source is None:
            raise LookupError(f"static file {name!r} not found (imported by the page's modules)")
        for url in IMPORT.findall(Path(source).read_text()):
            target = posixpath.normpath(posixpath.join(posixpath.dirname(name), url))
            if target not in seen:
                seen.append(target)
                todo.append(target)
    return seen


# The Metrics page's ES modules, preloaded (under their hashed names) so the browser fetches
# them in parallel rather than discovering them import by import.
METRICS_MODULES = _imported_modules("js/metrics.js")
# Its style sheets beside the site's app.css: one per feature of the charts.
METRICS_STYLESHEETS = [f"css/{name}.css" for name in ("charts", "heatmap", "health", "custom")]


@require_GET
@ensure_csrf_cookie
def runs_page(request: HttpRequest) -> HttpResponse:
    return render(request, "runs.html")


@require_GET
@ensure_csrf_cookie
def metrics_page(request: HttpRequest, run_id: int) -> HttpResponse:
    run = get_object_or_404(Run.objects.select_related("project"), pk=run_id)
    view = "custom" if request.GET.get("view") == "custom" else "all"
    # The catalog rides along with the page: the charts can be laid out without a round trip.
    context = {"run": run, "view": view, "run_info": reads.run_detail(run),
               "catalog": reads.catalog(run), "modules": METRICS_MODULES,
               "stylesheets": METRICS_STYLESHEETS,
               "layout": layout_of(run, _dashboard(request)) if view == "custom" else None}
    return render(request, "metrics.html", context)


def _dashboard(request: HttpRequest) -> str:
    """The Custom view dashboard asked for (`?dashboard=`), the default one if unusable."""
    try:
        return clean_name(request.GET.get("dashboard", DEFAULT))
    except LayoutError:
        return DEFAULT
