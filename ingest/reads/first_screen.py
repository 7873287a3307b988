"""The first screen's series, read with the Metrics page itself (telescope_ui.pages embeds them
as a JSON script tag): the page draws its first charts without a series request.

Which series the first screen shows depends on the viewport and on the All view's placement
rules (static/js/core/catalog.js), which live in the browser. This picks by the same section
order — General, the trainer's sections by first appearance, then the fixed sections in
FIXED_SECTIONS order — the catalog entries that charts draw (no normalized twin, no counter of
the collapsed Data quality section), in catalog order within a section, until a budget of
series and points is spent. The budget keeps the page small: every byte of it comes before the
page's modules can run. A guess that misses a chart costs that chart one series request, as
without the embedding; what is embedded is exactly what `series` returns for the same ids and
`max_points`, each distinct pair of step and time arrays written once (`shared_axes`): series
logged at the same steps share them (the demo's 75 series share one pair: its first screen is
~160 KB of JSON instead of ~520 KB, which the server gzips and the browser parses before the
page's modules run).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ingest.reads import catalog as reads

# static/js/core/catalog.js FIXED_SECTIONS (the derived sections, in page order).
FIXED_SECTIONS = ("Reward", "Sample metrics", "Advantage", "Groups", "Rollouts",
                  "Discarded rollouts", "Timeline", "Ranges", "Data quality")
# static/js/charts/compose.js QUALITY_STATS: counters drawn in the Data quality section, last.
QUALITY_STATS = frozenset({"null_count", "gini_excluded", "outside_count", "canceled"})
MAX_SERIES = 100
MAX_TOTAL_POINTS = 15_000
READ_BATCH = 25


def _timeline_key(entry: dict[str, Any]) -> bool:
    """catalog.js isTimelineKey: a trainer's own `timing_*` key goes to the Timeline section."""
    return entry["kind"] == "timeline" or (
        entry["kind"] == "step" and entry.get("section") == "Timeline"
        and entry["key"].startswith("timing_") and "/" not in entry["key"])


def page_order(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The entries a chart draws, by the All view's section order (catalog order within one)."""
    seen: dict[str, int] = {}

    def rank(entry: dict[str, Any]) -> tuple[int, int]:
        section = entry.get("section") or "General"
        if entry["kind"] == "step" and not _timeline_key(entry):
            if section == "General":
                return (0, 0)
            return (1, seen.setdefault(section, len(seen)))
        fixed = FIXED_SECTIONS.index(section) if section in FIXED_SECTIONS else len(FIXED_SECTIONS)
        return (2, fixed)

    drawn = [e for e in entries if not e.get("normalized")
             and not (e["kind"] != "step" and e.get("stat") in QUALITY_STATS)]
    ranks = [rank(e) for e in drawn]  # in catalog order: first appearances are numbered so
    return [e for _, e in sorted(zip(ranks, drawn, strict=True), key=lambda pair: pair[0])]


def first_screen(run_id: int, entries: list[dict[str, Any]], max_points: int,
                 max_series: int = MAX_SERIES,
                 max_total_points: int = MAX_TOTAL_POINTS) -> dict[str, Any]:
    """`{"max_points", "seq", "series": {id: payload}}`: the first entries of `page_order`,
    each as `reads.series` returns it at `max_points`, while at most `max_series` series and
    `max_total_points` points in all. `seq` is the oldest of the reads' seqs (every series is
    current as of at least it)."""
    ids = [e["id"] for e in page_order(entries)][:max_series]
    out: dict[str, Any] = {}
    seq: int | None = None
    points = 0
    for start in range(0, len(ids), READ_BATCH):
        body = reads.series(run_id, ids[start:start + READ_BATCH], max_points, None, None)
        seq = body["seq"] if seq is None else min(seq, body["seq"])
        for sid in ids[start:start + READ_BATCH]:
            payload = body["series"].get(sid)
            if payload is None:
                continue
            points += len(payload["step"])
            if points > max_total_points:
                return {"max_points": max_points, "seq": seq, "series": out}
            out[sid] = payload
    return {"max_points": max_points, "seq": seq or 0, "series": out}


def shared_axes(body: dict[str, Any]) -> dict[str, Any]:
    """`body` (first_screen's) with each distinct pair of step and time arrays once, in
    `axes` (`[[step, time], …]`), and each series naming its pair by index (`axis`) instead of
    holding it. static/js/metrics.js takeEmbedded puts them back."""
    axes: list[list[Any]] = []
    index: dict[tuple[bytes, bytes, str, str], int] = {}
    series: dict[str, Any] = {}
    for sid, payload in body["series"].items():
        step, time = np.asarray(payload["step"]), np.asarray(payload["time"])
        key = (step.tobytes(), time.tobytes(), step.dtype.str, time.dtype.str)
        if key not in index:
            index[key] = len(axes)
            axes.append([payload["step"], payload["time"]])
        series[sid] = {**{k: v for k, v in payload.items() if k not in ("step", "time")},
                       "axis": index[key]}
    return {**body, "axes": axes, "series": series}
