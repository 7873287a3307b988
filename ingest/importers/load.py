"""Send a `SourceRun` through the real ingest path (`ingest.write.frames.handle_objects`).

Idempotent: the run's incarnation is derived from the source run (`identity`) and the Telescope
run name, so importing the same run again reaches the same Telescope run; every message id
from that and the message's content (a step's id: its step and a digest of its time and
values), so the server acks an unchanged import as duplicates and adds nothing, while rows that
are new or changed since the last import (a run that went on logging, a resumed W&B run's
steps logged again) are stored. The run.start's id digests the whole import (config, status,
every step's id), so an import that changes anything starts the run again (config,
`total_steps` and status brought up to date) and one that changes nothing adds nothing.

`total_steps` is never the last step read: a run.start carries the config, and the server
takes `total_steps` from its `total_steps` or `max_steps` (the length the source planned);
without them it stays unknown.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import orjson

from ingest.importers.source import Row, SourceRun, json_config, parts
from ingest.write.frames import handle_objects

BATCH = 500  # messages per transaction (handle_objects takes at most 1000)


class ImportRejected(RuntimeError):
    """The server refused a message (its error reply)."""


@dataclass
class Imported:
    run: str  # the Telescope run name asked for
    run_id: int | None
    steps: int  # rows read from the source
    new_messages: int
    duplicate_messages: int
    seconds: float

    @property
    def steps_per_second(self) -> float:
        return self.steps / self.seconds if self.seconds > 0 else float("inf")


def import_run(project_id: int, source: SourceRun, run_name: str,
               progress: Callable[[int, int], None] | None = None) -> Imported:
    """Read `source` and store it as run `run_name`; `progress(done, total)` after each batch
    (in steps)."""
    started = time.perf_counter()
    rows = source.read()
    prefix = _prefix(source, run_name)
    new = duplicates = 0
    run_id: int | None = None
    done = 0
    batch: list[dict[str, Any]] = []
    for msg, steps in _messages(source, rows, run_name, prefix):
        batch.append(msg)
        done += steps
        if len(batch) >= BATCH:
            n, d, run_id = _apply(project_id, batch, run_id)
            new, duplicates, batch = new + n, duplicates + d, []
            if progress:
                progress(done, len(rows))
    if batch:
        n, d, run_id = _apply(project_id, batch, run_id)
        new, duplicates = new + n, duplicates + d
    if progress:
        progress(len(rows), len(rows))
    return Imported(run_name, run_id, len(rows), new, duplicates,
                    time.perf_counter() - started)


def _prefix(source: SourceRun, run_name: str) -> str:
    digest = hashlib.sha256(f"{source.kind}\0{source.identity}\0{run_name}".encode())
    return f"import-{source.kind}-{digest.hexdigest()[:20]}"


def _digest(*parts: Any) -> str:
    return hashlib.sha256(orjson.dumps(parts, option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]


def _messages(source: SourceRun, rows: list[Row], run_name: str,
              prefix: str) -> Iterator[tuple[dict[str, Any], int]]:
    """(message, steps it completes) in order: run.start, the steps, run.end."""
    base = {"v": 1, "run": run_name, "incarnation": prefix}
    steps: list[tuple[dict[str, Any], int]] = []
    for step, when, metrics in rows:
        pieces = parts(metrics)
        for i, piece in enumerate(pieces):
            msg = {**base, "id": f"{prefix}-s{step}-{_digest(when, piece)}", "type": "step",
                   "step": step, "metrics": piece}
            if when is not None:
                msg["time"] = when
            steps.append((msg, int(i == len(pieces) - 1)))
    config = json_config({**source.config, "imported_from": source.kind})
    when = rows[0][1] if rows else None
    generation = _digest(config, when, source.status, [m["id"] for m, _ in steps])
    start: dict[str, Any] = {**base, "id": f"{prefix}-start-{generation}", "type": "run.start",
                             "config": config}
    if when is not None:
        start["time"] = when
    yield start, 0
    yield from steps
    if source.status:
        yield {**base, "id": f"{prefix}-end-{generation}", "type": "run.end",
               "status": source.status}, 0


def _apply(project_id: int, batch: list[dict[str, Any]],
           run_id: int | None) -> tuple[int, int, int | None]:
    new = duplicates = 0
    for outcome in handle_objects(project_id, batch):
        reply = outcome.reply
        if reply.get("type") != "ack":
            raise ImportRejected(f"message {reply.get('id')} refused: {reply.get('code')} "
                                 f"({reply.get('field')}): {reply.get('message')}")
        if reply.get("duplicate"):
            duplicates += 1
        else:
            new += 1
        run_id = getattr(outcome, "run_id", None) or run_id
    return new, duplicates, run_id
