"""Sample text (`prompt`, `completion`; PROTOCOL.md §1): stored compressed per (message, step),
apart from the numeric columns, and read back for the samples API.

A samples message's text is stored in its transaction beside its batches (ingest.store), one
`SampleText` row per step it spans, holding that step's texts in the order of the step's
`SampleBatch` of the same message (`columns.step_slices`), so row i of one is row i of the
other. Aggregation, series and distribution reads never touch this table.

Limits (UTF-8 bytes; settings, docs/protocol.md "Sample text"):
- per message, `TELESCOPE_MAX_TEXT_BYTES_PER_MESSAGE`: checked by the wire validator, which
  refuses a larger message with an error naming `prompt` or `completion` (this module hands it
  the setting);
- per run, `TELESCOPE_MAX_TEXT_BYTES_PER_RUN` (0 = none): once a run holds that much, a further
  message's text is left out — its samples are stored and the ack names the fields in
  `left_out` — so a run never loses rewards to its text budget. The count is one row per run,
  updated under the run's row lock that every write of the run holds.

Compression happens after the commit, off the ack path: compressing a megabyte of text takes
several times longer than storing the message's numbers, so the transaction writes the text
raw and one background thread per process (`Compressor`) compresses the rows of committed
messages and rewrites them once ingest pauses (or the raw backlog grows large). A row a crash
left raw stays readable, and the next pass of any process compresses it (`compressed` is
false: a partial index finds them).

Blob format: one byte, 0 raw or 1 zlib (level 1: text shrinks about 3×), then msgpack
`[prompts, completions]` (compressed when 1), each a list of the step's samples' strings or
nulls, or null when the message had no such column.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
import zlib
from typing import Any

import msgpack
import numpy as np
from django.conf import settings
from django.core.signals import setting_changed
from django.db import DatabaseError, connection, transaction

from ingest import columns
from trainer_hooks.wire import protocol as p

log = logging.getLogger(__name__)
RAW, ZLIB = b"\x00", b"\x01"
LEVEL = 1
SWEEP_ROWS = 100  # leftover raw rows compressed per query
SETTINGS = ("TELESCOPE_MAX_TEXT_BYTES_PER_MESSAGE", "TELESCOPE_MAX_TEXT_BYTES_PER_RUN")

Texts = tuple[list[str | None] | None, list[str | None] | None]  # (prompts, completions)


def apply_settings(**_: Any) -> None:
    """Hand the per-message limit to the wire validator (at import, and when a test overrides
    the setting)."""
    p.set_text_limit(settings.TELESCOPE_MAX_TEXT_BYTES_PER_MESSAGE)


def _on_setting_changed(setting: str, **_: Any) -> None:
    if setting in SETTINGS:
        apply_settings()


apply_settings()
setting_changed.connect(_on_setting_changed)


# ---------------------------------------------------------------- write


def store(run_id: int, msg: p.Samples) -> dict[str, str]:
    """Store the text of a samples message (in its transaction, the run's row locked). Returns
    what was left out, {field: why}: everything, when the run's text limit would be passed."""
    if not msg.has_text:
        return {}
    names = [name for name in p.TEXT_COLUMNS if getattr(msg, name) is not None]
    limit = settings.TELESCOPE_MAX_TEXT_BYTES_PER_RUN
    used = run_bytes(run_id) if limit else 0
    if limit and used + msg.text_bytes > limit:
        why = (f"the run already holds {used:,} bytes of sample text and this message "
               f"{msg.text_bytes:,} more; its limit is {limit:,} "
               "(TELESCOPE_MAX_TEXT_BYTES_PER_RUN): the samples are stored without text")
        return dict.fromkeys(names, why)
    slices = columns.step_slices(msg.step)
    rows = []
    for step, idx in slices:
        cols = [_take(getattr(msg, name), idx) for name in p.TEXT_COLUMNS]
        if all(c is None or c.count(None) == len(c) for c in cols):
            continue  # no sample of this step has text
        nbytes = msg.text_bytes if len(slices) == 1 else sum(
            p.utf8_bytes([s for s in c if s is not None]) for c in cols if c is not None)
        rows.append((run_id, step, msg.id, int(idx.size), nbytes, False, encode(cols)))
    if not rows:
        return {}
    with connection.cursor() as cur:
        cur.executemany("INSERT INTO ingest_sampletext (run_id, step, msg_id, n, nbytes,"
                        " compressed, data) VALUES (%s, %s, %s, %s, %s, %s, %s)", rows)
        cur.execute("INSERT INTO ingest_sampletextusage (run_id, nbytes) VALUES (%s, %s)"
                    " ON CONFLICT (run_id) DO UPDATE"
                    " SET nbytes = ingest_sampletextusage.nbytes + excluded.nbytes",
                    [run_id, sum(r[4] for r in rows)])
    steps, raw = [r[1] for r in rows], sum(r[4] for r in rows)
    transaction.on_commit(lambda: COMPRESSOR.submit(run_id, msg.id, steps, raw))
    return {}


def _take(values: list[str | None] | None, idx: np.ndarray) -> list[str | None] | None:
    if values is None:
        return None
    if idx.size == len(values) and (idx.size < 2 or bool((np.diff(idx) == 1).all())):
        return values  # the whole message, in order: the usual case
    return [values[i] for i in idx.tolist()]


def encode(texts: list[list[str | None] | None]) -> bytes:
    """A raw blob (what the transaction writes)."""
    return RAW + msgpack.packb(texts, use_bin_type=True)


def compress(blob: bytes) -> bytes:
    """A raw blob compressed (the same texts)."""
    data = bytes(blob)
    return data if data[:1] == ZLIB else ZLIB + zlib.compress(data[1:], LEVEL)


def decode(blob: bytes) -> Texts:
    data = bytes(blob)
    if data[:1] == ZLIB:
        packed = zlib.decompress(data[1:])
    elif data[:1] == RAW:
        packed = data[1:]
    else:
        raise ValueError(f"unknown sample text format {data[:1]!r}")
    prompts, completions = msgpack.unpackb(packed, raw=False)
    return prompts, completions


def run_bytes(run_id: int) -> int:
    """UTF-8 bytes of sample text the run holds."""
    with connection.cursor() as cur:
        cur.execute("SELECT nbytes FROM ingest_sampletextusage WHERE run_id = %s", [run_id])
        row = cur.fetchone()
    return int(row[0]) if row else 0


# ---------------------------------------------------------------- compression


class Compressor:
    """Compresses the text rows of committed messages on one background thread per process, so
    that no ack waits for zlib and compression does not contend with a burst of writes: it
    starts once no text was written for QUIET_SECONDS, or when the raw backlog reaches
    MAX_RAW_BYTES, or MAX_WAIT_SECONDS after the oldest job. The first pass of a process also
    compresses whatever a crashed process left raw. `wait` compresses everything now."""

    QUIET_SECONDS = 0.5
    MAX_WAIT_SECONDS = 10.0
    MAX_RAW_BYTES = 64 << 20

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.jobs: list[tuple[int, str, list[int]]] = []
        self.backlog = 0
        self.last = self.oldest = 0.0
        self.busy = self.hurry = False
        self.swept = False
        self.thread: threading.Thread | None = None

    def submit(self, run_id: int, msg_id: str, steps: list[int], nbytes: int) -> None:
        with self.cond:
            now = time.monotonic()
            if not self.jobs:
                self.oldest = now
            self.jobs.append((run_id, msg_id, steps))
            self.backlog += nbytes
            self.last = now
            if self.thread is None or not self.thread.is_alive():
                self.thread = threading.Thread(target=self._loop, name="telescope-texts",
                                               daemon=True)
                self.thread.start()
            self.cond.notify_all()

    def wait(self, timeout: float | None = 60.0) -> bool:
        """Compress every job submitted so far now; True once done (tests, shutdown)."""
        with self.cond:
            self.hurry = True
            self.cond.notify_all()
            done = self.cond.wait_for(lambda: not self.jobs and not self.busy, timeout)
            self.hurry = False
            return done

    def _delay(self) -> float | None:
        """Seconds until the pending jobs are due (0: now; None: there are none)."""
        if not self.jobs:
            return None
        if self.hurry or self.backlog >= self.MAX_RAW_BYTES:
            return 0.0
        now = time.monotonic()
        return max(0.0, min(self.last + self.QUIET_SECONDS, self.oldest + self.MAX_WAIT_SECONDS)
                   - now)

    def _loop(self) -> None:
        while True:
            with self.cond:
                while (delay := self._delay()) != 0.0:
                    self.cond.wait(delay)
                jobs, self.jobs, self.backlog, self.busy = self.jobs, [], 0, True
            try:
                self._run(jobs)
            finally:
                with self.cond:
                    self.busy = False
                    self.cond.notify_all()

    def _run(self, jobs: list[tuple[int, str, list[int]]]) -> None:
        try:
            for run_id, msg_id, steps in jobs:
                marks = ", ".join(["%s"] * len(steps))
                self._compress("SELECT id, data FROM ingest_sampletext WHERE run_id = %s AND"
                               f" step IN ({marks}) AND msg_id = %s AND NOT compressed",
                               [run_id, *steps, msg_id])
            if not self.swept:
                self.swept = True
                while self._compress("SELECT id, data FROM ingest_sampletext WHERE NOT"
                                     f" compressed ORDER BY id LIMIT {SWEEP_ROWS}", []):
                    pass
        except DatabaseError as exc:  # the raw rows stay readable; a later pass retries them
            self.swept = False
            log.warning("sample text not compressed yet: %s", exc)
        finally:
            connection.close()

    @staticmethod
    def _compress(query: str, params: list[Any]) -> int:
        with connection.cursor() as cur:
            cur.execute(query, params)
            found = cur.fetchall()
        rows = [(compress(data), True, pk) for pk, data in found]
        if rows:
            with transaction.atomic(), connection.cursor() as cur:
                cur.executemany("UPDATE ingest_sampletext SET data = %s, compressed = %s"
                                " WHERE id = %s AND NOT compressed", rows)
        return len(rows)


COMPRESSOR = Compressor()
atexit.register(COMPRESSOR.wait, 30.0)  # what this process stored leaves compressed


# ---------------------------------------------------------------- read


def step_texts(run_id: int, step: int) -> dict[str, tuple[int, Texts]]:
    """The texts of one step of a run, per message id: (samples, (prompts, completions))."""
    with connection.cursor() as cur:
        cur.execute("SELECT msg_id, n, data FROM ingest_sampletext WHERE run_id = %s"
                    " AND step = %s", [run_id, step])
        rows = cur.fetchall()
    return {msg_id: (n, decode(data)) for msg_id, n, data in rows}
