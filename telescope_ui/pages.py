"""HTML pages (PROTOCOL.md §6) and the locally served Plotly bundle."""

from __future__ import annotations

import functools
import gzip
import hashlib
from pathlib import Path

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.csrf import ensure_csrf_cookie
from django.views.decorators.http import require_GET

from ingest.models import Run


@require_GET
@ensure_csrf_cookie
def runs_page(request: HttpRequest) -> HttpResponse:
    return render(request, "runs.html")


@require_GET
@ensure_csrf_cookie
def metrics_page(request: HttpRequest, run_id: int) -> HttpResponse:
    run = get_object_or_404(Run.objects.select_related("project"), pk=run_id)
    view = "custom" if request.GET.get("view") == "custom" else "all"
    return render(request, "metrics.html", {"run": run, "view": view})


@functools.cache
def _plotly_bundle() -> tuple[bytes, bytes, str]:
    import plotly

    path = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    raw = path.read_bytes()
    return raw, gzip.compress(raw, 6), hashlib.sha256(raw).hexdigest()[:16]


@require_GET
def plotly_js(request: HttpRequest) -> HttpResponse:
    """plotly.min.js from the installed plotly package (never a CDN), gzip-compressed once."""
    raw, packed, etag = _plotly_bundle()
    if request.headers.get("If-None-Match") == f'"{etag}"':
        return HttpResponse(status=304)
    gz = "gzip" in request.headers.get("Accept-Encoding", "")
    response = HttpResponse(packed if gz else raw, content_type="application/javascript")
    if gz:
        response["Content-Encoding"] = "gzip"
    response["Vary"] = "Accept-Encoding"
    response["ETag"] = f'"{etag}"'
    response["Cache-Control"] = "public, max-age=86400"
    return response
