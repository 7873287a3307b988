"""The Custom view's layouts: validation and the JSON endpoint `/api/runs/<id>/layout`.

GET returns the layout of the run's project (empty until first saved); PUT replaces it (a
CSRF-protected page write). A layout is `{"charts": [{"id", "wide", "settings"}]}` in page
order; every problem is a 400 naming the offending field, e.g. `charts[3].settings.logY`.
A PUT may carry `"base"`: the `updated_at` of the layout it was edited from. When the stored
layout has changed since (another page saved), it is refused with 409 and the current layout,
so nobody's dashboard is overwritten unseen.
"""

from __future__ import annotations

import math
from typing import Any

import orjson
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.views.decorators.http import require_http_methods

from ingest.models import Run
from telescope_ui.models import Layout

MAX_CHARTS = 300
MAX_ID_CHARS = 2000
BOOL_SETTINGS = ("ignoreOutliers", "ignoreFirst", "logY", "band")
NUMBER_SETTINGS = ("yMin", "yMax")


class LayoutError(ValueError):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


def clean_layout(body: Any) -> list[dict[str, Any]]:
    """The charts of a layout body, checked and normalized; LayoutError names the bad field."""
    if not isinstance(body, dict):
        raise LayoutError("body", "the body must be a JSON object")
    base = body.get("base")
    if base is not None and not isinstance(base, str):
        raise LayoutError("base", "base must be the updated_at the layout was loaded with, or null")
    charts = body.get("charts")
    if not isinstance(charts, list):
        raise LayoutError("charts", "charts must be a list")
    if len(charts) > MAX_CHARTS:
        raise LayoutError("charts", f"{len(charts)} charts; a layout holds at most {MAX_CHARTS}")
    seen: set[str] = set()
    return [_clean_chart(item, f"charts[{i}]", seen) for i, item in enumerate(charts)]


def _clean_chart(item: Any, where: str, seen: set[str]) -> dict[str, Any]:
    if not isinstance(item, dict):
        raise LayoutError(where, "a chart must be an object")
    unknown = sorted(set(item) - {"id", "wide", "settings"})
    if unknown:
        raise LayoutError(f"{where}.{unknown[0]}", f"unknown chart field {unknown[0]!r}")
    sid = item.get("id")
    if not isinstance(sid, str) or not 0 < len(sid) <= MAX_ID_CHARS:
        raise LayoutError(f"{where}.id", f"id must be a series id of 1–{MAX_ID_CHARS} characters")
    if sid in seen:
        raise LayoutError(f"{where}.id", f"series {sid!r} is already in the layout")
    seen.add(sid)
    wide = item.get("wide", False)
    if not isinstance(wide, bool):
        raise LayoutError(f"{where}.wide", "wide must be true or false")
    return {"id": sid, "wide": wide, "settings": _clean_settings(item.get("settings"), where)}


def _clean_settings(settings: Any, where: str) -> dict[str, Any]:
    if settings is None:
        return {}
    if not isinstance(settings, dict):
        raise LayoutError(f"{where}.settings", "settings must be an object")
    out: dict[str, Any] = {}
    for key, value in settings.items():
        at = f"{where}.settings.{key}"
        if key in BOOL_SETTINGS:
            if not isinstance(value, bool):
                raise LayoutError(at, f"{key} must be true or false")
        elif key in NUMBER_SETTINGS:
            ok = value is None or (type(value) in (int, float) and math.isfinite(value))
            if not ok:
                raise LayoutError(at, f"{key} must be a finite number or null")
        else:
            raise LayoutError(at, f"unknown chart setting {key!r}")
        out[key] = value
    return out


def layout_of(run: Run) -> dict[str, Any]:
    layout = Layout.objects.filter(project_id=run.project_id, name="default").first()
    if layout is None:
        return {"project": run.project.name, "charts": [], "updated_at": None}
    return {"project": run.project.name, "charts": layout.charts,
            "updated_at": layout.updated_at.isoformat()}


@require_http_methods(["GET", "PUT"])
def layout(request: HttpRequest, run_id: int) -> HttpResponse:
    run = get_object_or_404(Run.objects.select_related("project"), pk=run_id)
    if request.method == "PUT":
        try:
            body = orjson.loads(request.body)
            charts = clean_layout(body)
        except orjson.JSONDecodeError:
            return _reply({"error": "the body must be JSON", "field": "body"}, 400)
        except LayoutError as exc:
            return _reply({"error": exc.message, "field": exc.field}, 400)
        with transaction.atomic():
            current = (Layout.objects.select_for_update()
                       .filter(project_id=run.project_id, name="default").first())
            stamp = current.updated_at.isoformat() if current else None
            if "base" in body and body["base"] != stamp:
                return _reply({"error": "the dashboard was changed elsewhere since it was loaded",
                               "field": "base", "layout": layout_of(run)}, 409)
            Layout.objects.update_or_create(project_id=run.project_id, name="default",
                                            defaults={"charts": charts})
    return _reply(layout_of(run))


def _reply(data: Any, status: int = 200) -> HttpResponse:
    return HttpResponse(orjson.dumps(data), status=status, content_type="application/json")
