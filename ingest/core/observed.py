"""A run's observed ranges (ingest.models.ObservedRange): merged at ingest, read by the
materializer, and what a normalized chart's badge reports.

Merging happens in the samples message's transaction. A range that *widens* changes the
normalized values of every earlier step of the run where that range is in use (a bound not
declared), so the run's steps are marked for re-aggregation — which the server's pipeline
does in the background. A range seen for the first time changes nothing earlier.
"""

from __future__ import annotations

from collections.abc import Callable

from django.db import connection

from ingest.core.columns import dictionary
from ingest.core.normalize import Observed, bound, observed_in
from ingest.core.ranges import EnvRanges
from trainer_hooks.wire import protocol as p


def observed_ranges(run_id: int) -> Observed:
    return {k: (lo, hi) for k, (lo, hi, _, _) in _with_bases(run_id).items()}


def _with_bases(run_id: int) -> dict[tuple[str, str, str], tuple[float, float, float, float]]:
    """The run's observed ranges with their bases (lo, hi, base lo, base hi); a row from before
    migration 0012 has none: its range stands in."""
    with connection.cursor() as cur:
        cur.execute("SELECT env, kind, key, lo, hi, base_lo, base_hi FROM ingest_observedrange"
                    " WHERE run_id = %s", [run_id])
        return {(env, kind, key): (lo, hi, lo if b_lo is None else b_lo,
                                   hi if b_hi is None else b_hi)
                for env, kind, key, lo, hi, b_lo, b_hi in cur.fetchall()}


SIGNIFICANT = 0.01  # a range in use grew by more than this share of its width


def observed_of(msg: p.Samples) -> Observed:
    """The ranges a samples message spans: per environment, the lowest and highest finite
    reward and sample metric of its kept samples (the message alone: no database)."""
    kept = msg.discard_reason == ""
    columns = [("reward", "reward", msg.reward),
               *(("sample", m, v) for m, v in msg.metrics.items())]
    names, codes = dictionary(msg, "env")
    return observed_in(names.tolist(), codes, kept, columns)


def merge_observed(run_id: int, seen: Observed,
                   declared: Callable[[], dict[str, EnvRanges]]) -> str | None:
    """Widen the run's observed ranges by those a samples message spans (`observed_of`). When
    a range that is in use (not fully declared) widened, earlier steps must be re-aggregated:
    "major" when one grew by more than SIGNIFICANT of its width (or had none), "minor" for
    smaller creep; else None. `declared()` gives the run's declarations (read only when a
    range widened)."""
    if not seen:
        return None
    known = _with_bases(run_id)
    new, widened, change = [], [], None
    ranges: dict[str, EnvRanges] | None = None
    for (env, kind, key), (lo, hi) in seen.items():
        old = known.get((env, kind, key))
        if old is None:
            new.append((run_id, env, kind, key, lo, hi, lo, hi))
        elif lo < old[0] or hi > old[1]:
            wide = (min(lo, old[0]), max(hi, old[1]))
            widened.append((*wide, run_id, env, kind, key))
            ranges = declared() if ranges is None else ranges
            decl = bound(ranges.get(env, EnvRanges()) if env else EnvRanges(), None, kind, key)
            if decl.source != "declared":
                # growth since the steps were last normalized by it, not since the last message
                width = old[3] - old[2]
                grew = (wide[1] - wide[0] - width) > SIGNIFICANT * width
                change = "major" if grew or change == "major" else "minor"
    with connection.cursor() as cur:
        if new:
            cur.executemany("INSERT INTO ingest_observedrange (run_id, env, kind, key, lo, hi,"
                            " base_lo, base_hi) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)", new)
        if widened:
            cur.executemany("UPDATE ingest_observedrange SET lo = %s, hi = %s WHERE run_id = %s"
                            " AND env = %s AND kind = %s AND key = %s", widened)
    return change
