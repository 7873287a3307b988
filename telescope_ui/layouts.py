"""The Custom view's dashboards and templates: the layout format, its checks, and the JSON
endpoints `/api/runs/<id>/layout` and `/api/runs/<id>/templates`.

A layout (version 2) is `{"version": 2, "sections": [{"id", "title", "collapsed", "items"}]}`;
an item is a plot `{"type": "plot", "id", "title", "wide", "settings", "series": [{"id",
"axis"}]}` or a group `{"type": "group", "id", "title", "plots": [plot, ...]}`. Node ids are
unique in a layout; a series id may appear in several plots, once per plot; `axis` is `auto`,
`left` or `right`. Every problem is a 400 naming the offending field, e.g.
`sections[1].items[0].plots[2].series[0].axis`. Version 1, `{"charts": [{"id", "wide",
"settings"}]}`, is still taken (checked as before, field names `charts[3].settings.logY`) and
migrated: one section "Charts" of one-series plots. A layout stored as version 1 is migrated
when read. static/js/custom/layout.js holds the same format and limits for the page.

A project has named dashboards (`?name=`, default "default"). GET returns one of the run's
project (empty until first saved) with the names of all of them; PUT replaces it, PATCH
`{"name": new}` renames it, DELETE removes it (CSRF-protected page writes). A PUT may carry
`"base"`: the `updated_at` of the layout it was edited from. When the stored layout has changed
since (another page saved), it is refused with 409 and the current layout, so nobody's
dashboard is overwritten unseen. Templates: GET lists the built-in ones, then the project's;
PUT `?name=` saves a layout as a template, DELETE removes one (a built-in one cannot be).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

import orjson
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.views.decorators.http import require_http_methods

from ingest.core.series_ids import series_id
from ingest.models import Run
from telescope_ui.api import json_response
from telescope_ui.models import Layout, Template

VERSION = 2
MAX_SECTIONS = 50
MAX_GROUPS = 200
MAX_PLOTS = 300
MAX_SERIES = 12  # per plot
MAX_TITLE_CHARS = 200
MAX_ID_CHARS = 2000
MAX_NAME_CHARS = 100
MAX_TEMPLATES = 100
MAX_CHARTS = MAX_PLOTS  # version 1
DEFAULT = "default"
MIGRATED_SECTION = "Charts"
AXES = ("auto", "left", "right")
NODE_ID = re.compile(r"[A-Za-z0-9_-]{1,32}")
BOOL_SETTINGS = ("ignoreOutliers", "ignoreFirst", "logY", "band")
NUMBER_SETTINGS = ("yMin", "yMax")
PLOT_FIELDS = {"type", "id", "title", "wide", "settings", "series"}
GROUP_FIELDS = {"type", "id", "title", "plots"}
SECTION_FIELDS = {"id", "title", "collapsed", "items"}


class LayoutError(ValueError):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


# ------------------------------------------------------------------ format


def upgrade(stored: Any) -> dict[str, Any]:
    """A stored layout in the current version: a version 1 list of charts is migrated."""
    if isinstance(stored, list):
        items = [{"type": "plot", "id": f"p{i + 1}", "title": "", "wide": c.get("wide", False),
                  "settings": c.get("settings", {}), "series": [{"id": c["id"], "axis": "auto"}]}
                 for i, c in enumerate(stored)]
        sections = [{"id": "s1", "title": MIGRATED_SECTION, "collapsed": False, "items": items}]
        return {"version": VERSION, "sections": sections if items else []}
    if isinstance(stored, dict) and stored.get("version") == VERSION:
        return {"version": VERSION, "sections": stored.get("sections", [])}
    return {"version": VERSION, "sections": []}


def clean_layout(body: Any) -> dict[str, Any]:
    """A layout body (either version), checked and normalized to the current version;
    LayoutError names the bad field."""
    if not isinstance(body, dict):
        raise LayoutError("body", "the body must be a JSON object")
    base = body.get("base")
    if base is not None and not isinstance(base, str):
        raise LayoutError("base", "base must be the updated_at the layout was loaded with, or null")
    if "version" not in body and "charts" in body:
        return upgrade(_clean_charts(body["charts"]))
    if body.get("version") != VERSION:
        raise LayoutError("version", f"version must be {VERSION} (or leave it out and send "
                                     "version 1's charts)")
    return {"version": VERSION, "sections": _Checker().sections(body.get("sections"))}


class _Checker:
    """Checks the nodes of one layout: shapes, limits, node ids unique across the layout."""

    def __init__(self) -> None:
        self.ids: set[str] = set()
        self.groups = 0
        self.plots = 0

    def sections(self, value: Any) -> list[dict[str, Any]]:
        items = _list(value, "sections", MAX_SECTIONS, "sections")
        out = []
        for i, s in enumerate(items):
            at = f"sections[{i}]"
            _fields(s, at, SECTION_FIELDS, "a section")
            out.append({"id": self.node_id(s.get("id"), at), "title": _title(s.get("title"), at),
                        "collapsed": _bool(s.get("collapsed", False), f"{at}.collapsed"),
                        "items": [self.item(it, f"{at}.items[{j}]") for j, it in
                                  enumerate(_list(s.get("items", []), f"{at}.items", None, ""))]})
        return out

    def item(self, item: Any, at: str) -> dict[str, Any]:
        if isinstance(item, dict) and item.get("type") == "group":
            _fields(item, at, GROUP_FIELDS, "a group")
            self.groups += 1
            if self.groups > MAX_GROUPS:
                raise LayoutError(at, f"a layout holds at most {MAX_GROUPS} groups")
            plots = _list(item.get("plots", []), f"{at}.plots", None, "")
            return {"type": "group", "id": self.node_id(item.get("id"), at),
                    "title": _title(item.get("title"), at),
                    "plots": [self.plot(p, f"{at}.plots[{k}]") for k, p in enumerate(plots)]}
        return self.plot(item, at)

    def plot(self, plot: Any, at: str) -> dict[str, Any]:
        _fields(plot, at, PLOT_FIELDS, "a plot")
        if plot.get("type") != "plot":
            raise LayoutError(f"{at}.type", "type must be 'plot' (or 'group' in a section)")
        self.plots += 1
        if self.plots > MAX_PLOTS:
            raise LayoutError(at, f"a layout holds at most {MAX_PLOTS} plots")
        return {"type": "plot", "id": self.node_id(plot.get("id"), at),
                "title": _title(plot.get("title"), at),
                "wide": _bool(plot.get("wide", False), f"{at}.wide"),
                "settings": _clean_settings(plot.get("settings"), at),
                "series": _series(plot.get("series"), f"{at}.series")}

    def node_id(self, value: Any, at: str) -> str:
        if not isinstance(value, str) or not NODE_ID.fullmatch(value):
            raise LayoutError(f"{at}.id", "id must be 1–32 letters, digits, _ or -")
        if value in self.ids:
            raise LayoutError(f"{at}.id", f"id {value!r} is used twice in the layout")
        self.ids.add(value)
        return value


def _list(value: Any, at: str, limit: int | None, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise LayoutError(at, f"{at.rsplit('.', 1)[-1]} must be a list")
    if limit is not None and len(value) > limit:
        raise LayoutError(at, f"{len(value)} {what}; a layout holds at most {limit}")
    return value


def _fields(node: Any, at: str, allowed: set[str], what: str) -> None:
    if not isinstance(node, dict):
        raise LayoutError(at, f"{what} must be an object")
    unknown = sorted(set(node) - allowed)
    if unknown:
        raise LayoutError(f"{at}.{unknown[0]}", f"unknown field {unknown[0]!r} of {what}")


def _bool(value: Any, at: str) -> bool:
    if not isinstance(value, bool):
        raise LayoutError(at, f"{at.rsplit('.', 1)[-1]} must be true or false")
    return value


def _title(value: Any, at: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str) or len(value) > MAX_TITLE_CHARS or _control(value):
        raise LayoutError(f"{at}.title", f"a title has at most {MAX_TITLE_CHARS} printable "
                                         "characters")
    return value.strip()


def _control(text: str) -> bool:
    return any(ord(c) < 32 or ord(c) == 127 for c in text)


def _series(value: Any, at: str) -> list[dict[str, str]]:
    items = _list(value, at, MAX_SERIES, "series")
    if not items:
        raise LayoutError(at, "a plot draws at least one series")
    seen: set[str] = set()
    out = []
    for i, s in enumerate(items):
        where = f"{at}[{i}]"
        _fields(s, where, {"id", "axis"}, "a series")
        sid = _series_id(s.get("id"), f"{where}.id")
        if sid in seen:
            raise LayoutError(f"{where}.id", f"series {sid!r} is already in this plot")
        seen.add(sid)
        axis = s.get("axis", "auto")
        if axis not in AXES:
            raise LayoutError(f"{where}.axis", "axis must be 'auto', 'left' or 'right'")
        out.append({"id": sid, "axis": axis})
    return out


def _series_id(value: Any, at: str) -> str:
    if not isinstance(value, str) or not 0 < len(value) <= MAX_ID_CHARS:
        raise LayoutError(at, f"id must be a series id of 1–{MAX_ID_CHARS} characters")
    return value


def _clean_charts(charts: Any) -> list[dict[str, Any]]:
    """Version 1's charts, checked as version 1 always was."""
    if not isinstance(charts, list):
        raise LayoutError("charts", "charts must be a list")
    if len(charts) > MAX_CHARTS:
        raise LayoutError("charts", f"{len(charts)} charts; a layout holds at most {MAX_CHARTS}")
    seen: set[str] = set()
    out = []
    for i, item in enumerate(charts):
        where = f"charts[{i}]"
        _fields(item, where, {"id", "wide", "settings"}, "a chart")
        sid = _series_id(item.get("id"), f"{where}.id")
        if sid in seen:
            raise LayoutError(f"{where}.id", f"series {sid!r} is already in the layout")
        seen.add(sid)
        out.append({"id": sid, "wide": _bool(item.get("wide", False), f"{where}.wide"),
                    "settings": _clean_settings(item.get("settings"), where)})
    return out


def _clean_settings(settings: Any, where: str) -> dict[str, Any]:
    if settings is None:
        return {}
    if not isinstance(settings, dict):
        raise LayoutError(f"{where}.settings", "settings must be an object")
    out: dict[str, Any] = {}
    for key, value in settings.items():
        at = f"{where}.settings.{key}"
        if key in BOOL_SETTINGS:
            _bool(value, at)
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
    if len(value) > MAX_NAME_CHARS or _control(value):
        raise LayoutError(field, f"a dashboard name has 1–{MAX_NAME_CHARS} printable characters")
    return value.strip()


# ------------------------------------------------------------------ built-in templates


def _plot(pid: str, title: str, *sids: str, wide: bool = False) -> dict[str, Any]:
    return {"type": "plot", "id": pid, "title": title, "wide": wide, "settings": {},
            "series": [{"id": sid, "axis": "auto"} for sid in sids]}


def _step(*keys: str) -> list[str]:
    return [series_id("step", k) for k in keys]


# The health of a GRPO run at a glance. A plot lists the keys trainers log the figure under
# (Telescope's defaults, the posttrain names, TRL's through trainer_hooks); it draws those the
# runs have.
GRPO_HEALTH = {"version": VERSION, "sections": [
    {"id": "s1", "title": "Signal", "collapsed": False, "items": [
        _plot("p1", "Reward", series_id("reward", "reward", "mean"), *_step("train/reward_mean"),
              wide=True),
        _plot("p2", "Informative groups", series_id("groups", "groups", "informative"),
              series_id("groups", "groups", "count")),
        _plot("p3", "Truncation", series_id("rollouts", "stop_reason_length_pct",
                                            "stop_reason_length_pct"),
              *_step("train/rollout_truncated_frac")),
    ]},
    {"id": "s2", "title": "Policy", "collapsed": False, "items": [
        {"type": "group", "id": "g1", "title": "Drift", "plots": [
            _plot("p4", "KL", *_step("kl_divergence_inference", "train/kl_mean", "train/kl_max")),
            _plot("p5", "Entropy", *_step("entropy", "train/entropy")),
        ]},
        {"type": "group", "id": "g2", "title": "Update", "plots": [
            _plot("p6", "Gradient norm", *_step("grad_norm", "train/grad_norm")),
            _plot("p7", "Clip fraction", *_step("train/clip_frac", "train/clip_fraction")),
        ]},
    ]},
]}
BUILTIN_TEMPLATES = {"GRPO health": GRPO_HEALTH}


# ------------------------------------------------------------------ endpoints


def layout_of(run: Run, name: str = DEFAULT) -> dict[str, Any]:
    layouts = Layout.objects.filter(project_id=run.project_id)
    names = sorted(layouts.values_list("name", flat=True), key=lambda n: (n != DEFAULT, n))
    layout = layouts.filter(name=name).first()
    return {"project": run.project.name, "name": name, "names": names,
            **upgrade(layout.charts if layout else None),
            "updated_at": layout.updated_at.isoformat() if layout else None}


def _answer(fn: Callable[[], HttpResponse]) -> HttpResponse:
    try:
        return fn()
    except orjson.JSONDecodeError:
        return json_response({"error": "the body must be JSON", "field": "body"}, 400)
    except LayoutError as exc:
        return json_response({"error": exc.message, "field": exc.field}, 400)


@require_http_methods(["GET", "PUT", "PATCH", "DELETE"])
def layout(request: HttpRequest, run_id: int) -> HttpResponse:
    run = get_object_or_404(Run.objects.select_related("project"), pk=run_id)

    def handle() -> HttpResponse:
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

    return _answer(handle)


def _replace(run: Run, name: str, body: dict[str, Any], doc: dict[str, Any]) -> HttpResponse:
    with transaction.atomic():
        current = (Layout.objects.select_for_update()
                   .filter(project_id=run.project_id, name=name).first())
        stamp = current.updated_at.isoformat() if current else None
        if "base" in body and body["base"] != stamp:
            return json_response({
                "error": "the dashboard was changed elsewhere since it was loaded",
                "field": "base", "layout": layout_of(run, name)}, 409)
        Layout.objects.update_or_create(project_id=run.project_id, name=name,
                                        defaults={"charts": doc})
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


def templates_of(run: Run) -> dict[str, Any]:
    """The built-in templates, then the project's (by name)."""
    own = Template.objects.filter(project_id=run.project_id).order_by("name")
    return {"project": run.project.name, "templates": [
        *({"name": n, "builtin": True, **doc, "updated_at": None}
          for n, doc in BUILTIN_TEMPLATES.items()),
        *({"name": t.name, "builtin": False, **upgrade(t.layout),
           "updated_at": t.updated_at.isoformat()} for t in own)]}


@require_http_methods(["GET", "PUT", "DELETE"])
def templates(request: HttpRequest, run_id: int) -> HttpResponse:
    run = get_object_or_404(Run.objects.select_related("project"), pk=run_id)

    def handle() -> HttpResponse:
        if request.method == "GET":
            return json_response(templates_of(run))
        name = clean_name(request.GET.get("name"))
        if name in BUILTIN_TEMPLATES:
            return json_response({"error": f"{name!r} is a built-in template", "field": "name"},
                                 409)
        if request.method == "DELETE":
            Template.objects.filter(project_id=run.project_id, name=name).delete()
            return json_response(templates_of(run))
        doc = clean_layout(orjson.loads(request.body))
        with transaction.atomic():
            own = Template.objects.select_for_update().filter(project_id=run.project_id)
            if own.count() >= MAX_TEMPLATES and not own.filter(name=name).exists():
                raise LayoutError("name", f"a project keeps at most {MAX_TEMPLATES} templates")
            Template.objects.update_or_create(project_id=run.project_id, name=name,
                                              defaults={"layout": doc})
        return json_response(templates_of(run))

    return _answer(handle)
