"""Whole-run export: every stored series of a run — its trainer's step keys, the per-step
sample aggregates (reward, sample metrics, advantage, groups, rollouts, discarded, ranges) and
the series derived from its events — as one CSV (docs/protocol.md "Export").

Long format, one row per point: `series,kind,key,stat,env,step,time,value`, series in catalog
order, each in step order. Numbers are written in their shortest round-trip form, so
`float(text)` gives back the stored float exactly; an absent time is empty; a categorical
series' value is its string. The text is made a column at a time (orjson formats a numpy array
in C; numpy indexes the categorical strings) and joined in C, with no Python code per point,
and yielded in pieces of at most CHUNK_ROWS rows, so a run of millions of points streams in
bounded memory. Series are read straight from the point store a batch at a time (not through
the page's cache, whose working set an export would evict).
"""

from __future__ import annotations

import csv
import io
import itertools
from collections.abc import Iterator
from typing import Any

import numpy as np
import orjson
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


def _numbers(a: np.ndarray) -> list[bytes]:
    """Each number's shortest round-trip text (orjson's, in C: numpy's float-to-string cast is
    several times slower), a non-finite one (no value) as an empty field."""
    text: list[bytes] = orjson.dumps(a, option=orjson.OPT_SERIALIZE_NUMPY)[1:-1].split(b",")
    if a.dtype.kind == "f" and not np.isfinite(a).all():
        fields = np.array(text, dtype=object)
        fields[~np.isfinite(a)] = b""
        text = fields.tolist()
    return text if a.size else []


def _texts(values: np.ndarray, table: np.ndarray) -> list[bytes]:
    """A categorical series' float codes → their strings as CSV fields (no value, or an
    unknown code: empty). The table is short (one entry per distinct string), not per point."""
    quoted = np.array([b""] + [b"" if t is None else _csv_fields([t]).encode()
                               for t in table.tolist()], dtype=object)
    codes = np.full(values.shape, -1, dtype=np.int64)
    ok = np.isfinite(values)
    codes[ok] = values[ok].astype(np.int64)
    codes[(codes < 0) | (codes >= table.size)] = -1
    fields: list[bytes] = quoted[codes + 1].tolist()
    return fields


def _rows(prefix: bytes, step: np.ndarray, time: np.ndarray, value: list[bytes]) -> bytes:
    """CSV lines of one series' points: `prefix`, then step, time and value. The lines are
    joined by bytes.join over zip (C, no Python code per point)."""
    if not step.size:
        return b""
    lines = zip(itertools.repeat(prefix), _numbers(step), _numbers(time), value, strict=False)
    return b"\n".join(map(b",".join, lines)) + b"\n"


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
            prefix = _csv_fields([sid, kind, key, stat or "", env or ""]).encode()
            for lo in range(0, step.size, chunk_rows):
                hi = lo + chunk_rows
                text = (_texts(value[lo:hi], tables[pk]) if pk in tables
                        else _numbers(value[lo:hi]))
                yield _rows(prefix, step[lo:hi], time[lo:hi], text)
