"""HTML pages (PROTOCOL.md §6) and the locally served Plotly bundle."""

from __future__ import annotations

import asyncio
import functools
import gzip
import hashlib
import re
from pathlib import Path

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.csrf import ensure_csrf_cookie
from django.views.decorators.http import require_GET

from ingest import reads
from ingest.models import Run
from telescope_ui.layouts import DEFAULT, LayoutError, clean_name, layout_of


def _imported_modules(entry: str) -> list[str]:
    """`entry` and every module it imports, transitively (static `import ... from './x.js'`
    lines), as static paths: what a page's module graph needs, and nothing else."""
    root = settings.ASSETS_DIR / "static" / "js"
    seen, todo = [entry], [entry]
    while todo:
        text = (root / todo.pop()).read_text()
        for name in re.findall(r"""^\s*import\s[^'"]*?['"]\./([\w.-]+\.js)['"]""", text, re.M):
            if name not in seen:
                seen.append(name)
                todo.append(name)
    return [f"js/{name}" for name in seen]


# The Metrics page's ES modules, preloaded so the browser fetches them in parallel rather than
# discovering them import by import.
METRICS_MODULES = _imported_modules("metrics.js")
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


@functools.cache
def _plotly_bundle() -> tuple[bytes, bytes, str]:
    import plotly

    path = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    raw = path.read_bytes()
    return raw, gzip.compress(raw, 6), hashlib.sha256(raw).hexdigest()[:16]


def _compressed(request: HttpRequest, raw: bytes, packed: bytes, etag: str, content_type: str,
                cache_control: str) -> HttpResponse:
    """One asset: 304 when the browser has it, gzip when accepted, an ETag always."""
    if request.headers.get("If-None-Match") == f'"{etag}"':
        response = HttpResponse(status=304)
    else:
        gz = "gzip" in request.headers.get("Accept-Encoding", "")
        response = HttpResponse(packed if gz else raw, content_type=content_type)
        if gz:
            response["Content-Encoding"] = "gzip"
    response["Vary"] = "Accept-Encoding"
    response["ETag"] = f'"{etag}"'
    response["Cache-Control"] = cache_control
    return response


STATIC_TYPES = {
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
}


# SortableJS (package.json, `npm ci`), served as /static/vendor/sortablejs/sortable.esm.js.
VENDOR_PREFIX = "vendor/sortablejs/"
VENDOR_DIR = settings.BASE_DIR / "node_modules" / "sortablejs" / "modular"


@functools.lru_cache(maxsize=256)
def _static_bytes(path: Path, mtime_ns: int) -> tuple[bytes, bytes, str]:
    raw = path.read_bytes()
    return raw, gzip.compress(raw, 6), hashlib.sha256(raw).hexdigest()[:16]


@require_GET
async def static_asset(request: HttpRequest, name: str) -> HttpResponse:
    """The front end's own files under static/ (JS modules, CSS), gzip-compressed, revalidated
    by ETag on every load so a deploy is picked up at once (no build step, no hashed names).
    Async: a page loads some twenty of them at once, and they need no thread of their own."""
    root = (settings.ASSETS_DIR / "static").resolve()
    if name.startswith(VENDOR_PREFIX):  # front-end libraries installed by npm (package.json)
        root, name = VENDOR_DIR.resolve(), name.removeprefix(VENDOR_PREFIX)
    path = (root / name).resolve()
    content_type = STATIC_TYPES.get(path.suffix)
    if content_type is None or not path.is_relative_to(root) or not path.is_file():
        raise Http404(name)
    raw, packed, etag = _static_bytes(path, path.stat().st_mtime_ns)
    return _compressed(request, raw, packed, etag, content_type, "no-cache")


@require_GET
async def plotly_js(request: HttpRequest) -> HttpResponse:
    """plotly.min.js from the installed plotly package (never a CDN), gzip-compressed once."""
    if _plotly_bundle.cache_info().currsize:
        raw, packed, etag = _plotly_bundle()
    else:  # the one-time compression of 4.6 MB must not stall the event loop
        raw, packed, etag = await asyncio.to_thread(_plotly_bundle)
    return _compressed(request, raw, packed, etag, "application/javascript",
                       "public, max-age=86400")
