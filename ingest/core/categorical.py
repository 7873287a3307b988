"""Categorical step keys: string values (e.g. `optim/update_outcome` = "applied"), stored as
float codes into the series' own categories (ingest.models.SeriesCategory), so points,
snapshots, live deltas and caches stay numeric; reads turn codes back into strings.

A key is categorical from its first value on: a series is created categorical for a string and
numeric for a number, and a later value of the other kind is left out and reported (never the
rest of its step). Codes are assigned under the run's row lock, so processes agree on them.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from django.db import connection, transaction

# series pk -> {text: code}; filled after commit only (a rolled-back code never leaks)
_CODES: dict[int, dict[str, int]] = {}
# series pk -> categorical?; a series' kind never changes once created, and a pk is never
# reused (AUTOINCREMENT / sequences), so this may be filled before commit
_KINDS: dict[int, bool] = {}


def kinds(pks: list[int]) -> dict[int, bool]:
    """Whether each series is categorical (cached per process)."""
    missing = [pk for pk in pks if pk not in _KINDS]
    if missing:
        marks = ", ".join(["%s"] * len(missing))
        with connection.cursor() as cur:
            cur.execute(f"SELECT id, categorical FROM ingest_series WHERE id IN ({marks})",
                        missing)
            _KINDS.update({int(pk): bool(c) for pk, c in cur.fetchall()})
    return {pk: _KINDS.get(pk, False) for pk in pks}


def codes(series_pk: int, texts: list[str]) -> list[int]:
    """The codes of `texts` in a categorical series, adding the new ones."""
    known = dict(_CODES.get(series_pk, {}))
    if any(t not in known for t in texts):
        with connection.cursor() as cur:
            cur.execute("SELECT text, code FROM ingest_seriescategory WHERE series_id = %s",
                        [series_pk])
            known.update(cur.fetchall())
            for text in texts:
                if text not in known:
                    code = max(known.values(), default=-1) + 1
                    cur.execute("INSERT INTO ingest_seriescategory (series_id, code, text)"
                                " VALUES (%s, %s, %s)", [series_pk, code, text])
                    known[text] = code
        transaction.on_commit(lambda: _CODES.__setitem__(series_pk, known))
    return [known[t] for t in texts]


def texts(series_pks: list[int]) -> dict[int, np.ndarray]:
    """Per categorical series, its categories as an array indexed by code."""
    if not series_pks:
        return {}
    marks = ", ".join(["%s"] * len(series_pks))
    with connection.cursor() as cur:
        cur.execute(f"SELECT series_id, code, text FROM ingest_seriescategory"
                    f" WHERE series_id IN ({marks})", series_pks)
        rows = cur.fetchall()
    out: dict[int, list[Any]] = {pk: [] for pk in series_pks}
    for pk, code, text in rows:
        table = out[pk]
        table.extend([None] * (code + 1 - len(table)))
        table[code] = text
    return {pk: np.array(table, dtype=object) for pk, table in out.items()}


def decode(values: np.ndarray, table: np.ndarray) -> list[str | None]:
    """Float codes (NaN = no value) → strings (None)."""
    ok = np.isfinite(values)
    out = np.full(values.shape, None, dtype=object)
    if table.size:
        out[ok] = table[values[ok].astype(np.int64)]
    decoded: list[str | None] = out.tolist()
    return decoded
