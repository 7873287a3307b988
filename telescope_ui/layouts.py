"""The Custom view's dashboards: validation and the JSON endpoint `/api/runs/<id>/layout`.

A project has named dashboards (`?name=`, default "default"). GET returns one of the run's
project (empty until first saved) with the names of all of them; PUT replaces it, PATCH
`{"name": new}` renames it, DELETE removes it (CSRF-protected page writes). A layout is
`{"charts": [{"id", "wide", "settings"}]}` in page order; every problem is a 400 naming the
offending field, e.g. `charts[3].settings.logY`. A PUT may carry `"base"`: the `updated_at` of
the layout it was edited from. When the stored layout has changed since (another page saved),
it is refused with 409 and the current layout, so nobody's dashboard is overwritten unseen.
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
from telescope_ui.api import json_response
from telescope_ui.models import Layout

MAX_CHARTS = 300
MAX_ID_CHARS = 2000
MAX_NAME_CHARS = 100
DEFAULT = "default"
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


def clean_name(value: Any, field: str = "name") -> str:
    if not isinstance(value, str) or not value.strip():
        raise LayoutError(field, "a dashboard name must be a non-empty string")
    if len(value) > MAX_NAME_CHARS or any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise LayoutError(field, f"a dashboard name has 1–{MAX_NAME_CHARS} printable characters")
    return value.strip()


def layout_of(run: Run, name: str = DEFAULT) -> dict[str, Any]:
    layouts = Layout.objects.filter(project_id=run.project_id)
    names = sorted(layouts.values_list("name", flat=True), key=lambda n: (n != DEFAULT, n))
    layout = layouts.filter(name=name).first()
    return {"project": run.project.name, "name": name, "names": names,
            "charts": layout.charts if layout else [],
            "updated_at": layout.updated_at.isoformat() if layout else None}


@require_http_methods(["GET", "PUT", "PATCH", "DELETE"])
def layout(request: HttpRequest, run_id: int) -> HttpResponse:
    run = get_object_or_404(Run.objects.select_related("project"), pk=run_id)
    try:
        name = clean_name(request.GET.get("name", DEFAULT))
        if request.method == "GET":
            return json_response(layout_of(run, name))
        if request.method == "DELETE":
            Layout.objects.filter(project_id=run.project_id, name=name).delete()
            return json_response(layout_of(run, DEFAULT))
        body = orjson.loads(request.body)
        if request.method == "PATCH":
            return _rename(run, name, clean_name(body.get("name") if isinstance(body, dict)
                                                 else None))
        return _replace(run, name, body, clean_layout(body))
    except orjson.JSONDecodeError:
        return json_response({"error": "the body must be JSON", "field": "body"}, 400)
    except LayoutError as exc:
        return json_response({"error": exc.message, "field": exc.field}, 400)


def _replace(run: Run, name: str, body: dict[str, Any], charts: list[dict[str, Any]]
             ) -> HttpResponse:
    with transaction.atomic():
        current = (Layout.objects.select_for_update()
                   .filter(project_id=run.project_id, name=name).first())
        stamp = current.updated_at.isoformat() if current else None
        if "base" in body and body["base"] != stamp:
            return json_response({
                "error": "the dashboard was changed elsewhere since it was loaded",
                "field": "base", "layout": layout_of(run, name)}, 409)
        Layout.objects.update_or_create(project_id=run.project_id, name=name,
                                        defaults={"charts": charts})
    return json_response(layout_of(run, name))


def _rename(run: Run, name: str, new: str) -> HttpResponse:
    with transaction.atomic():
        layouts = Layout.objects.select_for_update().filter(project_id=run.project_id)
        if new != name and layouts.filter(name=new).exists():
            return json_response({"error": f"a dashboard named {new!r} exists already",
                                  "field": "name"}, 409)
        if not layouts.filter(name=name).update(name=new):
            return json_response({"error": f"no dashboard named {name!r}", "field": "name"}, 404)
    return json_response(layout_of(run, new))
