"""Whole-run export: every stored series of a run — its trainer's step keys, the per-step
sample aggregates (reward, sample metrics, advantage, groups, rollouts, discarded, ranges) and
the series derived from its events — as one CSV (docs/protocol.md "Export").

Long format, one row per point: `series,kind,key,stat,env,step,time,value`, series in catalog
order, each in step order. Numbers are written in their shortest round-trip form (numpy's
float-to-string cast), so `float(text)` gives back the stored float exactly; an absent time is
empty; a categorical series' value is its string. The text is made a column at a time by numpy
string ufuncs (no Python loop over points) and yielded in pieces of at most CHUNK_ROWS rows, so
a run of millions of points streams in bounded memory. Series are read straight from the point
store a batch at a time (not through the page's cache, whose working set an export would
evict).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from typing import Any

import numpy as np
from django.db import connection

from ingest.core import categorical, pointstore

COLUMNS = ("series", "kind", "key", "stat", "env", "step", "time", "value")
CHUNK_ROWS = 65_536  # rows of one yielded piece at most
SERIES_BATCH = 64  # series read from the point store at once


def _csv_fields(fields: list[Any]) -> str:
    """One CSV line's fields (quoted where they need it), as the csv module writes them."""
    out = io.StringIO()
    csv.writer(out, lineterminator="").writerow(fields)
    return out.getvalue()


HEADER = (_csv_fields(list(COLUMNS)) + "\n").encode()


def _numbers(a: np.ndarray) -> np.ndarray:
    """Shortest round-trip text of each number; NaN (no value) as an empty field."""
    text = a.astype(str)
    if a.dtype.kind == "f":
        text[np.isnan(a)] = ""
    return text


def _quoted(table: np.ndarray) -> np.ndarray:
    """A categorical series' strings as CSV fields, one per code (a short table, not points)."""
    return np.array(["" if t is None else _csv_fields([t]) for t in table.tolist()], dtype=str)


def _texts(values: np.ndarray, table: np.ndarray) -> np.ndarray:
    """Float codes → their quoted strings (NaN or an unknown code: empty)."""
    quoted = _quoted(table)
    out = np.full(values.shape, "", dtype=quoted.dtype if quoted.size else "<U1")
    ok = np.isfinite(values)
    codes = values[ok].astype(np.int64)
    known = codes < quoted.size
    idx = np.flatnonzero(ok)[known]
    out[idx] = quoted[codes[known]]
    return out


def _rows(prefix: str, step: np.ndarray, time: np.ndarray, value: np.ndarray) -> bytes:
    """CSV lines of one series' points: `prefix` then step, time, value."""
    body = np.strings.add(np.strings.add(np.strings.add(_numbers(step), ","),
                                         np.strings.add(_numbers(time), ",")), value)
    lead = prefix + ","
    return (lead + ("\n" + lead).join(body.tolist()) + "\n").encode()


def series_rows(run_id: int) -> list[tuple[int, str, str, str, str | None, str | None, bool]]:
    """(pk, sid, kind, key, stat, env, categorical) of every series of the run, catalog order."""
    with connection.cursor() as cur:
        cur.execute("SELECT id, sid, kind, key, stat, env, categorical FROM ingest_series"
                    " WHERE run_id = %s ORDER BY id", [run_id])
        return [(int(r[0]), r[1], r[2], r[3], r[4], r[5], bool(r[6])) for r in cur.fetchall()]


def csv_chunks(run_id: int, chunk_rows: int = CHUNK_ROWS) -> Iterator[bytes]:
    """The run's CSV: the header, then pieces of at most `chunk_rows` rows. Raises
    Run.DoesNotExist (before the header) for an unknown run."""
    pointstore.marks(run_id)  # the run exists
    rows = series_rows(run_id)
    yield HEADER
    for start in range(0, len(rows), SERIES_BATCH):
        batch = rows[start:start + SERIES_BATCH]
        pks = [r[0] for r in batch]
        arrays = pointstore.load(run_id, pks)
        tables = categorical.texts([r[0] for r in batch if r[6]])
        for pk, sid, kind, key, stat, env, _ in batch:
            step, time, value = arrays.pop(pk)
            prefix = _csv_fields([sid, kind, key, stat or "", env or ""])
            for lo in range(0, step.size, chunk_rows):
                hi = lo + chunk_rows
                text = (_texts(value[lo:hi], tables[pk]) if pk in tables
                        else _numbers(value[lo:hi]))
                yield _rows(prefix, step[lo:hi], time[lo:hi], text)
