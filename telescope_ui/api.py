"""Read API (docs/protocol.md "HTTP endpoints"): runs, catalog, series; the distribution of a
sample value over steps."""

from __future__ import annotations

import math
import zlib
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import orjson
from asgiref.sync import async_to_sync, sync_to_async
from channels.layers import get_channel_layer
from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import get_object_or_404
from django.views.csrf import csrf_failure as html_csrf_failure
from django.views.decorators.http import require_GET, require_http_methods

from ingest.core.payloads import run_info
from ingest.models import Run
from ingest.reads import catalog as reads
from ingest.reads import distribution as dist
from ingest.reads import export, headline, timeline
from ingest.reads.downsample import DEFAULT_MAX_POINTS, MAX_POINTS, MIN_POINTS
from ingest.write import health, housekeeping


def json_response(data: Any, status: int = 200) -> HttpResponse:
    body = orjson.dumps(data, option=orjson.OPT_SERIALIZE_NUMPY)
    return HttpResponse(body, status=status, content_type="application/json")


def _bad(field: str, message: str) -> HttpResponse:
    return json_response({"error": message, "field": field}, status=400)


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """settings.CSRF_FAILURE_VIEW: a write under /api/ without the page's CSRF token (or from
    another origin) is answered 403 JSON `{"error", "code": "csrf"}`, as scripts expect; a form
    post to a page keeps Django's HTML page."""
    if not request.path.startswith("/api/"):
        return html_csrf_failure(request, reason)
    return json_response({"error": f"CSRF check failed: {reason or 'refused'}; send the"
                          " csrftoken cookie's value in an X-CSRFToken header from the"
                          " dashboard's own origin", "code": "csrf"}, status=403)


@require_GET
def runs(request: HttpRequest) -> HttpResponse:
    """The runs, newest update first: `?project=` of one project, `?tag=` carrying that tag;
    `?headline=<series id>` adds each run's latest point of that series (`headline`: {"step",
    "value"}, null when it has none; `?headline=` alone: the reward's mean)."""
    qs = Run.objects.select_related("project").order_by("-updated_at")
    if request.GET.get("project"):
        qs = qs.filter(project__name=request.GET["project"])
    listed = list(qs)
    tag = request.GET.get("tag")
    if tag:  # in Python: SQLite's JSON has no `contains`, and a run list is short
        listed = [r for r in listed if tag in r.tags]
    infos = [run_info(r) for r in listed]
    if "headline" in request.GET:
        sid = request.GET["headline"] or headline.DEFAULT
        values = headline.latest([r.pk for r in listed], sid)
        for info in infos:
            info["headline"] = values.get(info["id"])
    return json_response({"runs": infos})


@require_http_methods(["GET", "PATCH", "DELETE"])
def run_detail(request: HttpRequest, run_id: int) -> HttpResponse:
    """GET one run; PATCH any of {"name", "notes", "color"}; DELETE it and all its data
    (writes are CSRF-protected, like the page's others)."""
    if request.method == "DELETE":
        if not housekeeping.delete(run_id):
            return json_response({"error": "no such run"}, status=404)
        return json_response({"deleted": run_id})
    run = get_object_or_404(Run.objects.select_related("project"), pk=run_id)
    if request.method == "PATCH":
        try:
            housekeeping.edit(run, orjson.loads(request.body))
        except orjson.JSONDecodeError:
            return _bad("body", "body must be JSON")
        except housekeeping.EditError as exc:
            return json_response({"error": exc.message, "field": exc.field}, status=exc.status)
    return json_response(reads.run_detail(run))


@require_GET
def catalog(request: HttpRequest, run_id: int) -> HttpResponse:
    run = get_object_or_404(Run, pk=run_id)
    return json_response(reads.catalog(run))


def _int_param(request: HttpRequest, name: str) -> int | None:
    raw = request.GET.get(name)
    if raw in (None, ""):
        return None
    try:
        return int(raw)
    except ValueError:
        raise ValueError(name) from None


@require_GET
def series(request: HttpRequest, run_id: int) -> HttpResponse:
    ids = [s for s in request.GET.get("ids", "").split(",") if s]
    if not ids:
        return _bad("ids", "ids is required: comma-separated series ids from the catalog")
    if len(ids) > 500:
        return _bad("ids", "at most 500 ids per request")
    try:
        max_points = _int_param(request, "max_points") or DEFAULT_MAX_POINTS
        min_step = _int_param(request, "min_step")
        max_step = _int_param(request, "max_step")
    except ValueError as exc:
        return _bad(str(exc), f"{exc} must be an integer")
    if not MIN_POINTS <= max_points <= MAX_POINTS:
        return _bad("max_points", f"max_points must be between {MIN_POINTS} and {MAX_POINTS}")
    try:
        return json_response(reads.series(run_id, ids, max_points, min_step, max_step))
    except Run.DoesNotExist:
        return json_response({"error": f"no run {run_id}"}, status=404)


@require_GET
def distribution(request: HttpRequest, run_id: int) -> HttpResponse:
    """Counts per (step bucket, value bin) of the reward, a sample metric or completion
    tokens, from the run's raw samples (ingest.reads.distribution)."""
    try:
        kind, key = dist.check(request.GET.get("kind"), request.GET.get("key"))
        bins = _int_param(request, "bins")
        max_steps = _int_param(request, "max_steps")
    except dist.DistributionError as exc:
        return _bad(exc.field, exc.message)
    except ValueError as exc:
        return _bad(str(exc), f"{exc} must be an integer")
    if not Run.objects.filter(pk=run_id).exists():
        return json_response({"error": f"no run {run_id}"}, status=404)
    return json_response(dist.distribution(
        run_id, kind, key, request.GET.get("env") or None,
        dist.DEFAULT_BINS if bins is None else bins,
        dist.DEFAULT_MAX_STEPS if max_steps is None else max_steps))


async def _drain(pieces: Iterator[bytes]) -> AsyncIterator[bytes]:
    """A sync generator (database reads) served under ASGI piece by piece: Django would read a
    sync iterator whole into memory first."""
    def pull() -> bytes | None:
        return next(pieces, None)
    while (piece := await sync_to_async(pull)()) is not None:
        yield piece


@require_GET
def export_csv(request: HttpRequest, run_id: int) -> HttpResponseBase:
    """Every series of the run as one CSV download, streamed (ingest.reads.export)."""
    pieces = export.csv_chunks(run_id)
    try:
        first = next(pieces)  # the run exists (a 404 now, not a broken download later)
    except Run.DoesNotExist:
        return json_response({"error": f"no run {run_id}"}, status=404)

    # Compressed here, as one gzip stream: Django's GZipMiddleware makes each piece of an async
    # stream its own gzip member, of which browsers and curl decode only the first.
    gzip = "gzip" in request.headers.get("Accept-Encoding", "")
    packer = zlib.compressobj(6, zlib.DEFLATED, 31) if gzip else None  # 31: a gzip header

    async def body() -> AsyncIterator[bytes]:
        yield packer.compress(first) if packer else first
        async for piece in _drain(pieces):
            out = packer.compress(piece) if packer else piece
            if out:
                yield out
        if packer:
            yield packer.flush()
    response = StreamingHttpResponse(body(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="run-{run_id}.csv"'
    response["Vary"] = "Accept-Encoding"
    if gzip:
        response["Content-Encoding"] = "gzip"
    return response


@require_GET
def healthz(request: HttpRequest) -> HttpResponse:
    """For load balancers and compose: the database, the channel layer and the aggregation
    backlog. 200 when the database can be read and written (a probe write, and this process's
    last ingest write did not fail: ingest.write.health) and the channel layer answers, else
    503 with the reason."""
    checks: dict[str, Any] = {}
    try:
        checks["backlog_steps"] = reads.total_pending_steps()
        health.probe()
        checks["database"] = health.last_failure() or "ok"
    except DatabaseError as exc:
        checks["database"] = f"error: {exc}".strip()
    try:
        layer = get_channel_layer()
        if layer is not None:
            async_to_sync(layer.group_send)("healthz", {"type": "healthz"})
        checks["channel_layer"] = "ok" if layer is not None else "none"
    except Exception as exc:  # noqa: BLE001 - any failure of the layer is the answer
        checks["channel_layer"] = f"error: {type(exc).__name__}: {exc}"
    ok = checks["database"] == "ok" and not str(checks["channel_layer"]).startswith("error")
    return json_response({"ok": ok, **checks}, status=200 if ok else 503)


def _float_param(request: HttpRequest, name: str) -> float | None:
    raw = request.GET.get(name)
    if raw in (None, ""):
        return None
    try:
        value = float(raw)
    except ValueError:
        raise timeline.ReadError(name, f"{name} must be a number (unix seconds)") from None
    if not math.isfinite(value):
        raise timeline.ReadError(name, f"{name} must be a finite number")
    return value


def _timeline_read(fn: Callable[[], dict[str, Any]], run_id: int) -> HttpResponse:
    try:
        return json_response(fn())
    except timeline.ReadError as exc:
        return _bad(exc.field, exc.message)
    except ValueError as exc:
        return _bad(str(exc), f"{exc} must be an integer")
    except Run.DoesNotExist:
        return json_response({"error": f"no run {run_id}"}, status=404)


@require_GET
def events(request: HttpRequest, run_id: int) -> HttpResponse:
    """Every event overlapping [start, end) (ingest.reads.timeline)."""
    return _timeline_read(lambda: timeline.events(
        run_id, _float_param(request, "start"), _float_param(request, "end"),
        request.GET.get("source") or None, _int_param(request, "limit")), run_id)


@require_GET
def events_trace(request: HttpRequest, run_id: int) -> HttpResponse:
    """The window as a Chrome trace, downloaded as a file (opens in Perfetto)."""
    response = _timeline_read(lambda: timeline.trace(
        run_id, _float_param(request, "start"), _float_param(request, "end")), run_id)
    if response.status_code == 200:
        response["Content-Disposition"] = f'attachment; filename="run-{run_id}.trace.json"'
    return response


@require_GET
def performance(request: HttpRequest, run_id: int) -> HttpResponse:
    """The time buckets of the run's events (ingest.reads.timeline)."""
    return _timeline_read(lambda: timeline.performance(
        run_id, _float_param(request, "bucket"), _float_param(request, "start"),
        _float_param(request, "end")), run_id)


@require_GET
def gauges(request: HttpRequest, run_id: int) -> HttpResponse:
    """The run's gauges per name, host and device (ingest.reads.timeline)."""
    names = [n for n in request.GET.get("names", "").split(",") if n] or None

    def read() -> dict[str, Any]:
        max_points = _int_param(request, "max_points") or DEFAULT_MAX_POINTS
        if not MIN_POINTS <= max_points <= MAX_POINTS:
            raise timeline.ReadError("max_points", f"max_points must be between {MIN_POINTS}"
                                     f" and {MAX_POINTS}")
        return timeline.gauges(run_id, names, request.GET.get("host") or None,
                               _float_param(request, "start"), _float_param(request, "end"),
                               max_points)
    return _timeline_read(read, run_id)
