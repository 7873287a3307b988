"""The sample viewer (`/runs/<id>/samples?step=S`) and its read API (`GET /api/runs/<id>/samples`,
docs/protocol.md "Read API: samples").

One step's stored samples: every batch of the step (ingest.core.columns) concatenated, filtered
(environment, kept or discarded, reward range), ordered by group then reward (highest first,
null last, then sample id), paged; the text of the page's samples (ingest.core.texts) only when
asked for. Beside them the ranges each environment's reward and sample metrics are coloured by
(declared, else observed: ingest.core.normalize.bound) and the neighbouring steps that have samples,
for the viewer's slider and keys.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson
from django.db import connection
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_GET

from ingest.core import columns, texts
from ingest.core.normalize import bound
from ingest.core.observed import observed_ranges
from ingest.core.payloads import run_info
from ingest.core.ranges import EnvRanges, env_ranges
from ingest.models import Run
from ingest.reads import catalog as reads
from telescope_ui.api import json_response
from telescope_ui.pages import SAMPLES_MODULES, find_run, run_missing

DEFAULT_LIMIT, MAX_LIMIT = 1_000, 10_000
PAGE_LIMIT = 2_000  # samples the viewer loads at once (more: "Show more")
FLOATS = ("reward", "advantage", "prompt_tokens", "completion_tokens", "off_policy_steps",
          "time")
STRINGS = ("env", "stop_reason", "discard_reason")  # '' (null) becomes None
# the columns of a sample after its ids, in the order the API lists them
COLUMNS = ("env", "reward", "advantage", "prompt_tokens", "completion_tokens", "stop_reason",
           "off_policy_steps", "discard_reason", "time")
TRUE, FALSE = ("1", "true", "yes"), ("0", "false", "no")


class BadParam(ValueError):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field, self.message = field, message


@dataclass(frozen=True)
class Query:
    step: int | None = None  # None: the newest step with samples
    env: str | None = None
    kept: bool | None = None  # True: kept samples only, False: discarded only
    min_reward: float | None = None
    max_reward: float | None = None
    limit: int = DEFAULT_LIMIT
    offset: int = 0
    text: bool = False


def parse_query(params: Any) -> Query:
    """The API's query string; BadParam names the first bad field."""
    def integer(name: str, default: int | None, lo: int, hi: int) -> int | None:
        raw = params.get(name)
        if raw in (None, ""):
            return default
        try:
            value = int(raw)
        except ValueError:
            raise BadParam(name, f"{name} must be an integer") from None
        if not lo <= value <= hi:
            raise BadParam(name, f"{name} must be between {lo} and {hi}")
        return value

    def number(name: str) -> float | None:
        raw = params.get(name)
        if raw in (None, ""):
            return None
        try:
            value = float(raw)
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            raise BadParam(name, f"{name} must be a finite number")
        return value

    def flag(name: str) -> bool | None:
        raw = params.get(name)
        if raw in (None, ""):
            return None
        if raw.lower() not in TRUE + FALSE:
            raise BadParam(name, f"{name} must be 1 or 0")
        return raw.lower() in TRUE

    lo, hi = number("min_reward"), number("max_reward")
    if lo is not None and hi is not None and lo > hi:
        raise BadParam("max_reward", "max_reward must not be below min_reward")
    return Query(step=integer("step", None, 0, 2**63 - 1), env=params.get("env") or None,
                 kept=flag("kept"), min_reward=lo, max_reward=hi,
                 limit=integer("limit", DEFAULT_LIMIT, 0, MAX_LIMIT) or 0,
                 offset=integer("offset", 0, 0, 2**31) or 0, text=bool(flag("text")))


# ---------------------------------------------------------------- reading a step


@dataclass
class StepTable:
    """Every stored sample of one step, columnar, in storage order."""

    count: int
    msg_ids: list[str]
    sizes: list[int]
    sample_id: list[Any]
    group_id: list[Any]
    floats: dict[str, np.ndarray]
    strings: dict[str, list[str | None]]
    metrics: dict[str, np.ndarray]


def load_step(run_id: int, step: int) -> StepTable | None:
    with connection.cursor() as cur:
        cur.execute("SELECT msg_id, n, data FROM ingest_samplebatch WHERE run_id = %s"
                    " AND step = %s ORDER BY id", [run_id, step])
        rows = cur.fetchall()
    if not rows:
        return None
    parts = [columns.decode_batch(data) for _, _, data in rows]
    sizes = [int(part["n"]) for part in parts]

    def floats(get: Any) -> np.ndarray:
        return np.concatenate([np.full(n, np.nan) if get(part) is None else get(part)
                               for part, n in zip(parts, sizes, strict=True)])

    def strings(name: str) -> list[Any]:
        out: list[Any] = []
        for part, n in zip(parts, sizes, strict=True):
            out.extend(part[name].tolist() if name in part else [""] * n)
        return out

    names = sorted({k for part in parts for k in part["metrics"]})
    return StepTable(
        count=sum(sizes), msg_ids=[r[0] for r in rows], sizes=sizes,
        sample_id=strings("sample_id"), group_id=strings("group_id"),
        floats={k: floats(lambda part, k=k: part.get(k)) for k in FLOATS},
        strings={k: [v or None for v in strings(k)] for k in STRINGS},
        metrics={k: floats(lambda part, k=k: part["metrics"].get(k)) for k in names})


def _codes(ids: list[Any]) -> np.ndarray:
    """Sort codes of ids: numeric when every id is an integer, else by their text."""
    if all(type(i) is int for i in ids):
        return np.unique(np.array(ids, dtype=np.int64), return_inverse=True)[1]
    return np.unique(np.array([str(i) for i in ids]), return_inverse=True)[1]


def select(t: StepTable, q: Query) -> tuple[np.ndarray, int]:
    """The indices of the samples the query asks for, in the API's order, and how many there
    are before paging."""
    reward = t.floats["reward"]
    keep = np.ones(t.count, dtype=bool)
    if q.env is not None:
        keep &= np.array([e == q.env for e in t.strings["env"]], dtype=bool)
    if q.kept is not None:
        kept = np.array([d is None for d in t.strings["discard_reason"]], dtype=bool)
        keep &= kept if q.kept else ~kept
    with np.errstate(invalid="ignore"):
        if q.min_reward is not None:
            keep &= reward >= q.min_reward
        if q.max_reward is not None:
            keep &= reward <= q.max_reward
    best_first = np.where(np.isnan(reward), np.inf, -reward)
    order = np.lexsort((_codes(t.sample_id), best_first, _codes(t.group_id)))
    order = order[keep[order]]
    return order[q.offset:q.offset + q.limit], int(order.size)


def records(t: StepTable, idx: np.ndarray, step: int,
            text: dict[str, list[Any]] | None) -> list[dict[str, Any]]:
    """The samples at `idx` as the API lists them (null for a value not stored)."""
    pick = idx.tolist()
    cols: dict[str, list[Any]] = {
        "sample_id": [t.sample_id[i] for i in pick], "group_id": [t.group_id[i] for i in pick]}
    for k in COLUMNS:
        cols[k] = [t.strings[k][i] for i in pick] if k in STRINGS else _nulls(t.floats[k][idx])
    if text is not None:
        cols.update({k: [v[i] for i in pick] for k, v in text.items()})
    names = list(t.metrics)
    values = [_nulls(t.metrics[k][idx]) for k in names]
    metrics = [dict(zip(names, row, strict=True)) for row in zip(*values, strict=True)] \
        if names else [{} for _ in pick]
    keys = list(cols)
    return [{"step": step, **dict(zip(keys, row, strict=True)), "metrics": m}
            for row, m in zip(zip(*cols.values(), strict=True), metrics, strict=True)]


def _nulls(values: np.ndarray) -> list[float | None]:
    return [None if v != v else v for v in values.tolist()]  # NaN: not stored


def step_text(run_id: int, step: int, t: StepTable) -> dict[str, list[Any]]:
    """Each sample's prompt and completion (None where not stored), aligned with `t`."""
    stored = texts.step_texts(run_id, step)
    out: dict[str, list[Any]] = {"prompt": [], "completion": []}
    for msg_id, n in zip(t.msg_ids, t.sizes, strict=True):
        found = stored.get(msg_id)
        both = found[1] if found is not None and found[0] == n else (None, None)
        for name, values in zip(("prompt", "completion"), both, strict=True):
            out[name].extend(values if values is not None else [None] * n)
    return out


# ---------------------------------------------------------------- the payload


def neighbours(run_id: int, step: int | None) -> dict[str, int | None]:
    """The first and last step with samples, and those next to `step` (None when absent)."""
    at = -1 if step is None else step
    with connection.cursor() as cur:
        cur.execute(
            "SELECT (SELECT MIN(step) FROM ingest_samplebatch WHERE run_id = %s),"
            " (SELECT MAX(step) FROM ingest_samplebatch WHERE run_id = %s),"
            " (SELECT MAX(step) FROM ingest_samplebatch WHERE run_id = %s AND step < %s),"
            " (SELECT MIN(step) FROM ingest_samplebatch WHERE run_id = %s AND step > %s)",
            [run_id, run_id, run_id, at, run_id, at])
        first, last, prev, nxt = cur.fetchone()
    return {"first_step": first, "last_step": last, "prev_step": prev, "next_step": nxt}


def step_size(run_id: int, step: int) -> int:
    with connection.cursor() as cur:
        cur.execute("SELECT COALESCE(SUM(n), 0) FROM ingest_samplebatch WHERE run_id = %s"
                    " AND step = %s", [run_id, step])
        return int(cur.fetchone()[0])


def colour_ranges(run_id: int, envs: list[str], metrics: list[str]) -> dict[str, Any]:
    """Per environment ('' = none) the range its reward and each sample metric are coloured
    by: declared bounds, else observed ones over the run (`invert` reverses the scale)."""
    declared, observed = env_ranges(run_id), observed_ranges(run_id)

    def one(env: str, kind: str, key: str) -> dict[str, Any]:
        ranges = declared.get(env, EnvRanges()) if env else EnvRanges()
        b = bound(ranges, observed.get((env, kind, key)), kind, key)
        return {"min": b.min, "max": b.max, "invert": b.invert, "source": b.source}

    return {env: {"reward": one(env, "reward", "reward"),
                  "metrics": {m: one(env, "sample", m) for m in metrics}} for env in envs}


def step_samples(run_id: int, q: Query) -> dict[str, Any]:
    """The API's answer (docs/protocol.md "Read API: samples", plus the viewer's fields)."""
    step = q.step
    if step is None:
        step = neighbours(run_id, None)["last_step"]
    near = neighbours(run_id, step)
    body: dict[str, Any] = {"run": run_id, "step": step, "samples": [], "total": 0,
                            "offset": q.offset, "limit": q.limit, **near,
                            "environments": [], "metrics": [], "ranges": {},
                            "seq": reads.run_seq(run_id)}
    if step is not None and q.limit == 0 and q == Query(step=step, limit=0):
        body["total"] = step_size(run_id, step)  # only the counts (a live page's look)
        return body
    t = None if step is None else load_step(run_id, step)
    if t is None or step is None:
        return body
    idx, total = select(t, q)
    text = step_text(run_id, step, t) if q.text and idx.size else None
    envs = sorted({e or "" for e in t.strings["env"]})
    body.update(samples=records(t, idx, step, text), total=total,
                environments=[e or None for e in envs], metrics=list(t.metrics),
                ranges=colour_ranges(run_id, envs, list(t.metrics)))
    return body


# ---------------------------------------------------------------- views


@require_GET
def samples_api(request: HttpRequest, run_id: int) -> HttpResponse:
    try:
        q = parse_query(request.GET)
    except BadParam as exc:
        return json_response({"error": exc.message, "field": exc.field}, status=400)
    if not Run.objects.filter(pk=run_id).exists():
        return json_response({"error": f"no run {run_id}"}, status=404)
    return json_response(step_samples(run_id, q))


@require_GET
def samples_page(request: HttpRequest, run_id: int) -> HttpResponse:
    run = find_run(run_id)
    if run is None:
        return run_missing(request, run_id)
    try:
        step = parse_query({"step": request.GET.get("step")}).step
    except BadParam:
        step = None
    initial = step_samples(run.pk, Query(step=step, limit=PAGE_LIMIT))
    # The run's status beside the samples (its badge; live `run` messages and a poll of the
    # read API keep it current).
    context = {"run": run, "run_info": run_info(run), "initial": _script_json(initial),
               "follow": step is None, "page_limit": PAGE_LIMIT, "modules": SAMPLES_MODULES}
    return render(request, "samples.html", context)


def _script_json(data: Any) -> str:
    """JSON for a <script type="application/json"> element: `<`, `>` and `&` escaped, as
    Django's json_script does, so no text of a sample can close the element."""
    raw = orjson.dumps(data).decode()
    safe = raw.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return mark_safe(safe)  # noqa: S308 - escaped above
