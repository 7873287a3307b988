"""Reads: the catalog, series with effective ranges, and points changed since a seq.

Series arrays are served from a per-process cache that is refreshed incrementally: every commit's
points are one block carrying the run seq of that commit (ingest.core.pointstore), so a reader
fetches only the blocks whose seq is above what it has. Any server process can serve any run;
the database stays the truth.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

import numpy as np
from django.db import connection

from ingest.core import categorical, pointstore
from ingest.core.normalize import PREFIX as NORM_PREFIX
from ingest.core.normalize import Observed, bound
from ingest.core.observed import observed_ranges
from ingest.core.payloads import catalog_entry, run_info
from ingest.core.pointstore import Arrays, merge
from ingest.core.ranges import EnvRanges, env_ranges
from ingest.models import Environment, Run, Series
from ingest.reads.downsample import clip_steps, downsample

CACHE_MAX_POINTS = 8_000_000


class SeriesCache:
    """LRU of series arrays per (run, series pk), each valid as of the run seq `seqs[run]`."""

    def __init__(self, max_points: int = CACHE_MAX_POINTS) -> None:
        self.max_points = max_points
        self.lock = threading.Lock()
        self.arrays: OrderedDict[tuple[int, int], Arrays] = OrderedDict()
        self.seqs: dict[int, int] = {}
        self.size = 0

    def get(self, run_id: int, pks: list[int]) -> tuple[int, dict[int, Arrays]]:
        """The run's seq and the arrays of the given series, current as of at least it."""
        with self.lock, pointstore.consistent():
            at = pointstore.marks(run_id)
            self._refresh(run_id, at)
            missing = [pk for pk in pks if (run_id, pk) not in self.arrays]
            if missing:
                for pk, arrays in pointstore.load(run_id, missing, at).items():
                    self._put((run_id, pk), arrays)
            out = {}
            for pk in pks:
                self.arrays.move_to_end((run_id, pk))
                out[pk] = self.arrays[(run_id, pk)]
            self._evict(keep=set(pks))
            return at.seq, out

    def _refresh(self, run_id: int, at: pointstore.Marks) -> None:
        """Bring the run's cached series to `at`: the blocks written since, or when those are
        no longer kept (folded into chunks and dropped), reload them."""
        seen = self.seqs.get(run_id)
        self.seqs[run_id] = at.seq
        if seen is None or seen >= at.seq:
            return
        cached = [pk for (r, pk) in self.arrays if r == run_id]
        if not cached:
            return
        if seen < at.replay:
            for pk, arrays in pointstore.load(run_id, cached, at).items():
                self._put((run_id, pk), arrays)
            return
        recent = pointstore.blocks(run_id, seen, at.seq)
        assert recent is not None
        for pk, arrays in recent.only(cached).by_series().items():
            self._put((run_id, pk), merge(self.arrays[(run_id, pk)], arrays))

    def _put(self, key: tuple[int, int], arrays: Arrays) -> None:
        old = self.arrays.get(key)
        self.size += arrays[0].size - (0 if old is None else old[0].size)
        self.arrays[key] = arrays

    def _evict(self, keep: set[int]) -> None:
        while self.size > self.max_points and len(self.arrays) > len(keep):
            key, arrays = next(iter(self.arrays.items()))
            if key[1] in keep:
                self.arrays.move_to_end(key)
                continue
            del self.arrays[key]
            self.size -= arrays[0].size


CACHE = SeriesCache()


def run_seq(run_id: int) -> int:
    with connection.cursor() as cur:
        cur.execute("SELECT seq FROM ingest_run WHERE id = %s", [run_id])
        row = cur.fetchone()
    if row is None:
        raise Run.DoesNotExist(run_id)
    return int(row[0])


# ---------------------------------------------------------------- API payloads


def catalog(run: Run) -> dict[str, Any]:
    rows = Series.objects.filter(run=run).order_by("pk").values_list(
        "sid", "kind", "key", "stat", "env", "nonfinite_count", "categorical")
    entries = []
    for sid, kind, key, stat, env, nonfinite, is_text in rows:
        entry = catalog_entry(sid, kind, key, stat, env, is_text)
        entry["nonfinite"] = nonfinite
        entries.append(entry)
    return {"series": entries, "environments": environments(run.pk), "seq": run.seq}


def environments(run_id: int) -> list[dict[str, Any]]:
    return [
        {"name": e.name, "weight": e.weight, "reward_min": e.reward_min,
         "reward_max": e.reward_max, "metrics_ranges": e.metrics_ranges}
        for e in Environment.objects.filter(run_id=run_id).order_by("name")
    ]


def series(run_id: int, sids: list[str], max_points: int, min_step: int | None,
           max_step: int | None) -> dict[str, Any]:
    """Downsampled arrays and effective range of each requested series; raises
    Run.DoesNotExist for an unknown run."""
    marks = ", ".join(["%s"] * len(sids))
    meta: dict[str, tuple[int, tuple[Any, ...]]] = {}
    text_pks: list[int] = []
    if sids:
        with connection.cursor() as cur:  # raw SQL: this is the hot read path
            cur.execute(f"SELECT sid, id, kind, key, stat, env, categorical FROM ingest_series"
                        f" WHERE run_id = %s AND sid IN ({marks})", [run_id, *sids])
            rows = cur.fetchall()
        meta = {row[0]: (row[1], row[2:6]) for row in rows}
        text_pks = [row[1] for row in rows if row[6]]
    seq, data = CACHE.get(run_id, [pk for pk, _ in meta.values()])
    ranged = any(m[0] in RANGED_KINDS for _, m in meta.values())
    envs = environments(run_id) if ranged else []
    declared = env_ranges(run_id) if ranged else {}
    observed = observed_ranges(run_id) if ranged else {}
    tables = categorical.texts(text_pks)
    out = {}
    for sid, (pk, (kind, key, stat, env)) in meta.items():
        step, time, value = data[pk]
        window = clip_steps(step, min_step, max_step)
        if pk in tables:  # strings, every point (a state strip is cheap to draw)
            out[sid] = {"step": step[window].tolist(), "time": time[window].tolist(),
                        "value": categorical.decode(value[window], tables[pk]),
                        "downsampled": False, "categorical": True}
            continue
        payload = downsample(step[window], time[window], value[window], max_points)
        if stat is not None and stat.startswith(NORM_PREFIX):
            payload["range"] = normalization_range(kind, key, env, declared, observed)
        else:
            payload["range"] = effective_range(kind, key, stat, env, envs, value)
        out[sid] = payload
    return {"series": out, "seq": seq, "missing": [s for s in sids if s not in meta]}


RANGED_KINDS = ("reward", "sample")
RANGED_STATS = {"mean", "min", "max"}


def effective_range(kind: str, key: str, stat: str | None, env: str | None,
                    envs: list[dict[str, Any]], value: np.ndarray) -> dict[str, Any]:
    """Declared bounds for reward and sample-metric level statistics, else observed."""
    lo = hi = None
    invert = False
    if stat in RANGED_STATS and kind in RANGED_KINDS:
        scope = [e for e in envs if env is None or e["name"] == env]
        if kind == "reward":
            bounds = [(e["reward_min"], e["reward_max"]) for e in scope]
        else:
            specs = [e["metrics_ranges"].get(key) for e in scope]
            bounds = [(s.get("min"), s.get("max")) for s in specs if s]
            invert = any(s.get("invert") for s in specs if s)
        mins = [b[0] for b in bounds if b[0] is not None]
        maxs = [b[1] for b in bounds if b[1] is not None]
        lo = min(mins) if mins else None
        hi = max(maxs) if maxs else None
    observed = (float(value.min()), float(value.max())) if value.size else (None, None)
    source = "declared" if lo is not None or hi is not None else "observed"
    return {"min": observed[0] if lo is None else lo, "max": observed[1] if hi is None else hi,
            "source": source, "invert": invert}


def normalization_range(kind: str, key: str, env: str | None,
                        declared: dict[str, EnvRanges], observed: Observed) -> dict[str, Any]:
    """What a normalized series was mapped by: its environment's range (`source` declared,
    observed or degenerate), or for all environments together each one's (`envs`) and a
    `source` that is `declared` only when every one is."""
    names = [env] if env is not None else sorted({n for n, k, m in observed
                                                 if (k, m) == (kind, key)})
    parts = []
    for name in names:
        b = bound(declared.get(name or "", EnvRanges()), observed.get((name or "", kind, key)),
                  kind, key)
        parts.append({"env": name or None, "min": b.min, "max": b.max, "source": b.source,
                      "invert": b.invert})
    if env is not None and parts:
        return {**parts[0], "normalized": True}
    sources = {p["source"] for p in parts}
    source = sources.pop() if len(sources) == 1 else "mixed"
    return {"min": 0.0, "max": 1.0, "source": source, "normalized": True, "envs": parts}


def changes_since(run_id: int, after_seq: int, limit: int) -> tuple[dict[str, Any], int] | None:
    """Points written after `after_seq` (a withdrawn point has value NaN, sent as null),
    grouped by series id, and the run's seq; None when more than `limit` points changed or the
    changes are no longer kept (the client should reload instead)."""
    found = pointstore.changes(run_id, after_seq, limit)
    if found is None:
        return None
    grouped, seq = found
    rows = Series.objects.filter(pk__in=list(grouped)).values_list("pk", "sid", "categorical")
    sids = {pk: sid for pk, sid, _ in rows}
    tables = categorical.texts([pk for pk, _, text in rows if text])
    points = {sids[pk]: {"step": a[0], "time": a[1],
                         "value": categorical.decode(a[2], tables[pk]) if pk in tables else a[2]}
              for pk, a in grouped.items()}
    return points, seq


def run_seqs(run_ids: list[int]) -> dict[int, int]:
    """The latest commit's seq of each run (a deleted run is absent)."""
    return dict(Run.objects.filter(pk__in=run_ids).values_list("pk", "seq"))


def pending_steps(run_id: int) -> int:
    """Steps of a run waiting to be (re-)aggregated (after a range change: all of them)."""
    with connection.cursor() as cur:
        cur.execute("SELECT COUNT(*) FROM ingest_stepstate WHERE dirty AND run_id = %s",
                    [run_id])
        return int(cur.fetchone()[0])


def total_pending_steps() -> int:
    """Steps of every run waiting to be (re-)aggregated."""
    with connection.cursor() as cur:
        cur.execute("SELECT COUNT(*) FROM ingest_stepstate WHERE dirty")
        return int(cur.fetchone()[0])


def run_detail(run: Run) -> dict[str, Any]:
    """`run_info` plus what only a single run's page needs: its config
    (docs/protocol.md "One run"; health hints read it) and its re-aggregation backlog."""
    return {**run_info(run), "config": run.config, "pending_steps": pending_steps(run.pk)}
