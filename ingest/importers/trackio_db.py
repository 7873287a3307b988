"""A trackio project → `SourceRun`s, read from its local SQLite database.

trackio keeps each project in `<TRACKIO_DIR>/<project>.db` (default
`~/.cache/huggingface/trackio/`): a `metrics` table of JSON rows (`run_id`, `run_name`, `step`,
`timestamp`, `metrics`) and a `configs` table (one JSON config per run). PATH is that `.db`
file, or a folder holding one project's. The database is opened read-only, so a trackio still
logging to it is not disturbed. Every run of the project is one `SourceRun`; non-finite values
(trackio stores them as "NaN"/"Infinity") arrive as nulls. A run that logged HF Trainer's
`train/global_step` (TRL, HF Trainer) is imported on it, not on trackio's own step, which
counts every log call; media and histograms (`{"_type": "trackio.image", ...}`) are left out
and counted, strings kept (categorical keys).

Damage: SQLite commits whole transactions, so a database has no torn tail: a file SQLite
cannot read (not a database, malformed pages: a copy cut short is one) is corrupt, and so is
a row whose `metrics` (or config) is not a JSON object or whose step is not a whole number
(`DamagedSource`, naming the file and the row's id): nothing of that run is imported.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from ingest.importers.source import (
    DamagedSource,
    Row,
    SourceRun,
    clean_run_name,
    merge_rows,
    on_user_axis,
    plain_config,
)

_NON_FINITE = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}


def database(path: Path) -> Path:
    """The project database at `path` (a `.db` file, or a folder with exactly one)."""
    if path.is_file():
        return path
    found = sorted(path.glob("*.db"))
    if len(found) != 1:
        raise ValueError(f"{path} holds {len(found)} trackio databases (*.db); name one")
    return found[0]


@contextmanager
def connect(db: Path) -> Iterator[sqlite3.Connection]:
    """The database, read-only; SQLite's errors (not a database, malformed) as DamagedSource
    naming the file."""
    try:
        with closing(sqlite3.connect(f"file:{db.resolve()}?mode=ro", uri=True,
                                     timeout=30)) as conn:
            conn.row_factory = sqlite3.Row
            yield conn
    except sqlite3.OperationalError as exc:
        if "locked" in str(exc):
            raise  # busy, not damaged
        raise DamagedSource(f"{db}: cannot be read as a trackio database ({exc})") from None
    except sqlite3.DatabaseError as exc:
        raise DamagedSource(f"{db}: cannot be read as a trackio database ({exc})") from None


def find_runs(path: Path) -> list[SourceRun]:
    db = database(path.resolve())
    with connect(db) as conn:
        columns = {r[1] for r in conn.execute("PRAGMA table_info(metrics)")}
        if not columns:
            raise ValueError(f"{db} is not a trackio project database (no metrics table)")
        ident = "run_id" if "run_id" in columns else "run_name"
        found = conn.execute(
            f"SELECT {ident} AS ident, run_name, COUNT(DISTINCT step) AS n, MIN(id) AS first"
            f" FROM metrics GROUP BY {ident} ORDER BY first").fetchall()
    return [_source(db, ident, row["ident"], row["run_name"], row["n"]) for row in found]


def _source(db: Path, column: str, ident: str, name: str, steps: int) -> SourceRun:
    run = SourceRun(kind="trackio", name=clean_run_name(name), identity=f"{db.stem}/{ident}",
                    read=list, steps_hint=steps, status="finished")
    run.read = lambda: _read(db, column, ident, run)
    return run


def _read(db: Path, column: str, ident: str, run: SourceRun) -> list[Row]:
    with connect(db) as conn:
        rows = conn.execute(f"SELECT id, step, timestamp, metrics FROM metrics WHERE {column}"
                            " = ? ORDER BY step, id", (ident,)).fetchall()
        run.config.update(_config(conn, db, column, ident))
    raw = [(_step(r, db), _time(r["timestamp"]), _values(r["metrics"], f"{db}: metrics row "
                                                         f"id {r['id']}")) for r in rows]
    return merge_rows(on_user_axis(raw, run.skipped), run.skipped)


def _step(row: sqlite3.Row, db: Path) -> int:
    step = row["step"]
    if type(step) is not int:
        raise DamagedSource(f"{db}: metrics row id {row['id']}: step {step!r} is not a whole "
                            "number (the database is damaged)")
    return step


def _config(conn: sqlite3.Connection, db: Path, column: str, ident: str) -> dict[str, Any]:
    if not {r[1] for r in conn.execute("PRAGMA table_info(configs)")} >= {column, "config"}:
        return {}
    row = conn.execute(f"SELECT config FROM configs WHERE {column} = ?", (ident,)).fetchone()
    return plain_config(_values(row["config"], f"{db}: config of run {ident!r}")) if row else {}


def _values(text: Any, where: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except (TypeError, ValueError) as exc:
        raise DamagedSource(f"{where}: not JSON ({exc}; the database is damaged)") from None
    if not isinstance(data, dict):
        raise DamagedSource(f"{where}: {type(data).__name__} where trackio writes a JSON "
                            "object (the database is damaged)")
    return {k: _NON_FINITE.get(v, v) if isinstance(v, str) else v for k, v in data.items()}


def _time(stamp: str | None) -> float | None:
    try:
        return datetime.fromisoformat(stamp).timestamp() if stamp else None
    except ValueError:
        return None
