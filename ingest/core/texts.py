"""Sample text (`prompt`, `completion`; docs/protocol.md "Sample text"): stored compressed per
(message, step), apart from the numeric columns, and read back for the samples API.

A samples message's text is stored in its transaction beside its batches (ingest.write.store), one
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

Text that `trainer_hooks` sent packed (its sender compressed it; `trainer_hooks.wire.texts`)
is stored as it came. Text sent as lists of strings is packed here, with bulk operations, no
Python per sample: the distinct strings of the step
(a GRPO group's samples share their prompt: it is stored once) concatenated into one UTF-8
text, their lengths, and per sample (prompts, then completions) the index of its string (-1:
none); the whole compressed with zstd (level 1: the bench's English-like text shrinks 3.6×,
against 2.9× with zlib's level 1 in about three times the time) in the transaction, so an ack
means the text is stored compressed. The payload's msgpack is built around the text, never
copying it; a large text (≥ 2 × 256 KiB) is cut into pieces compressed at once on as many
threads (the ingest thread and helpers, zstd running without the GIL), one zstd frame each.
Text that does not shrink (already compressed or random: a 32 KiB probe of a large payload's
text tells) is stored as it is. Measured (bench/samples.py), compressing in the transaction is
cheaper than writing the text raw and rewriting it compressed after the commit, as this module
once did: on SQLite a commit pays for every byte it writes (and the WAL checkpoint again), and
the rewrite wrote it all twice.

Blob format: one byte, then
- 6 (`WIRE`): msgpack `[n, prompt, completion]`, each null or a column exactly as the sender
  packed and compressed it (`trainer_hooks.wire.texts`: what `trainer_hooks` sends), written
  when every text column of a one-step message came packed: the server never recompresses;
- 4 (`ZSTD`), 5 (`STORED`), 3 (`PACKED`): the msgpack payload `[n, [has_prompt,
  has_completion], index, lengths, text]` — `index` int32 little-endian (n per present
  column), `lengths` int32 (characters of each distinct string), `text` their UTF-8
  concatenation (surrogates passed through) — compressed by zstd, one frame or several
  concatenated (what this module writes for text sent as lists of strings); as it is (text
  that does not shrink); or by zlib (rows written from migration 0010 until zstd; still read);
- 0 / 1: rows written before migration 0010 (which converts them): msgpack
  `[prompts, completions]`, raw or zlib; still read.
"""

from __future__ import annotations

import os
import threading
import zlib
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import msgpack
import numpy as np
from django.conf import settings
from django.core.signals import setting_changed
from django.db import connection

from ingest.core import columns, zstd
from trainer_hooks.wire import protocol as p
from trainer_hooks.wire.texts import PackedText, TextColumn, distinct

RAW, ZLIB, PACKED, ZSTD, STORED, WIRE = (b"\x00", b"\x01", b"\x03", b"\x04", b"\x05",
                                         b"\x06")
PROBE = 32 << 10  # a payload larger than 8 probes is first probed with its last PROBE bytes
SHRINK = 0.9  # (text, past the indexes) and compressed when they shrink to at most this
SPLIT = 256 << 10  # the least text a piece compressed apart holds (see `compress`)
HELPERS = min(3, (os.cpu_count() or 1) - 1)  # threads compressing pieces (0: none)
SETTINGS = ("TELESCOPE_MAX_TEXT_BYTES_PER_MESSAGE", "TELESCOPE_MAX_TEXT_BYTES_PER_RUN")

Column = list[str | None] | None
Texts = tuple[Column, Column]  # (prompts, completions)


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
    wire = (msg.prompt, msg.completion)
    sent = [c if isinstance(c, TextColumn) else None for c in wire]
    if len(slices) == 1 and all(c is None or s is not None for c, s in zip(wire, sent,
                                                                             strict=True)):
        # packed by the sender (one step, every column): stored as it came, not recompressed;
        # no row when no sample has text (as `pack` has none)
        step, idx = slices[0]
        if any(c is not None and bool((c.index >= 0).any()) for c in sent):
            rows.append((run_id, step, msg.id, int(idx.size), msg.text_bytes,
                         _as_sent(msg.n, sent)))
        slices = []
    if slices:
        p.check_text(msg)  # (the fallback reads the packed text)
    lists = [c.values() if isinstance(c, TextColumn) else c for c in wire] if slices else []
    for step, idx in slices:  # one row per step the message spans (usually one)
        cols = (_take(lists[0], idx), _take(lists[1], idx))
        packed = pack(cols, msg.text_bytes if len(slices) == 1 else None)
        if packed is not None:  # else no sample of this step has text
            rows.append((run_id, step, msg.id, int(idx.size), *packed))
    if not rows:
        return {}
    with connection.cursor() as cur:
        cur.executemany("INSERT INTO ingest_sampletext (run_id, step, msg_id, n, nbytes, data)"
                        " VALUES (%s, %s, %s, %s, %s, %s)", rows)
        cur.execute("INSERT INTO ingest_sampletextusage (run_id, nbytes) VALUES (%s, %s)"
                    " ON CONFLICT (run_id) DO UPDATE"
                    " SET nbytes = ingest_sampletextusage.nbytes + excluded.nbytes",
                    [run_id, sum(r[4] for r in rows)])
    return {}


def _as_sent(n: int, sent: list[TextColumn | None]) -> bytes:
    packed: bytes = msgpack.packb([n, *(None if c is None else c.data for c in sent)],
                                  use_bin_type=True)
    return WIRE + packed


def _take(values: Column, idx: np.ndarray) -> Column:
    if values is None:
        return None
    if idx.size == len(values) and (idx.size < 2 or bool((np.diff(idx) == 1).all())):
        return values  # the whole message, in order: the usual case
    return list(map(values.__getitem__, idx.tolist()))


def pack(cols: Texts, nbytes: int | None = None) -> tuple[int, bytes] | None:
    """One step's texts as one blob, with their UTF-8 bytes (`nbytes` when the caller has
    counted them: the wire validator did); None when no sample has text."""
    present = [c for c in cols if c is not None]
    if not present:
        return None
    n = len(present[0])
    values = present[0] if len(present) == 1 else present[0] + present[1]
    strings, index = distinct(values)
    if not strings:
        return None
    lengths = np.fromiter(map(len, strings), np.int32, len(strings))
    joined = "".join(strings)
    text = joined.encode("utf-8", "surrogatepass")
    if nbytes is None:  # this step's part of the message: each sample's bytes, summed
        sizes = lengths.astype(np.int64) if len(text) == len(joined) else np.fromiter(
            map(len, map(_utf8, strings)), np.int64, len(strings))
        nbytes = int(sizes[index[index >= 0]].sum())
    head = msgpack.packb([n, [c is not None for c in cols], index.astype("<i4").tobytes(),
                          lengths.astype("<i4").tobytes()], use_bin_type=True)
    # The payload is that array with `text` appended (fixarray 4 -> 5, then a bin header):
    # the text itself is never copied into a msgpack buffer (a copy of up to megabytes).
    return nbytes, compress(b"\x95" + head[1:] + _bin_header(len(text)), text)


def _bin_header(size: int) -> bytes:
    if size < 1 << 8:
        return b"\xc4" + size.to_bytes(1, "big")
    if size < 1 << 16:
        return b"\xc5" + size.to_bytes(2, "big")
    return b"\xc6" + size.to_bytes(4, "big")


_helpers: ThreadPoolExecutor | None = None
_helpers_lock = threading.Lock()


def _helper() -> ThreadPoolExecutor | None:
    """Threads that compress pieces of a large text while the ingest thread compresses its
    first piece (`compress`); None on one core."""
    global _helpers
    if _helpers is None and HELPERS:
        with _helpers_lock:
            if _helpers is None:
                _helpers = ThreadPoolExecutor(HELPERS, thread_name_prefix="texts-zstd")
    return _helpers


def _compress_part(data: memoryview) -> bytes:
    return zstd.contexts()[0].compress(data)


def compress(*parts: bytes) -> bytes:
    """A packed payload (given in parts, concatenated) as stored: zstd (`ZSTD`), or as it is
    (`STORED`) when it does not shrink — told by a probe of its end (the text) when it is
    large, so incompressible text costs little more than its copy. A text of k × SPLIT bytes
    or more (k ≥ 2) is cut into up to k pieces (one more than the helper threads), one frame
    each, compressed at once: the first by this thread, the others by helpers (zstd runs
    without the GIL); a piece no helper has started when this thread is done, it does itself."""
    cctx = zstd.contexts()[0]
    size = sum(map(len, parts))
    text = memoryview(parts[-1])
    if size > 8 * PROBE and len(text) >= PROBE and len(
            cctx.compress(text[-PROBE:])) > SHRINK * PROBE:
        return b"".join((STORED, *parts))
    k = min(HELPERS + 1, len(text) // SPLIT)
    cuts = [len(text) * i // k for i in range(k + 1)] if k > 1 else [0, len(text)]
    pieces = [text[a:b] for a, b in zip(cuts, cuts[1:], strict=False)]
    helper = _helper() if len(pieces) > 1 else None
    later = [helper.submit(_compress_part, piece) for piece in pieces[1:]] if helper else []
    first: tuple[bytes | memoryview, ...] = (*parts[:-1], pieces[0]) if later else parts
    stream = cctx.compressobj(size=sum(map(len, first)))  # frames record their sizes
    frames = [*map(stream.compress, first), stream.flush()]
    rest = [b""] * len(later)
    for i in reversed(range(len(later))):  # the last pieces are the last a helper would start
        rest[i] = cctx.compress(pieces[i + 1]) if later[i].cancel() else later[i].result()
    out = b"".join((ZSTD, *frames, *rest))
    return out if len(out) <= size else b"".join((STORED, *parts))


def _utf8(s: str) -> bytes:
    return s.encode("utf-8", "surrogatepass")


# ---------------------------------------------------------------- read


def decode(blob: bytes | memoryview) -> Texts:
    data = bytes(blob)
    kind = data[:1]
    if kind == ZSTD:  # one or more frames
        return _unpack(zstd.contexts()[1].decompressobj(read_across_frames=True).decompress(
            memoryview(data)[1:]))
    if kind == STORED:
        return _unpack(data[1:])
    if kind == WIRE:
        _, *wire = msgpack.unpackb(memoryview(data)[1:], raw=False)
        prompts, completions = (None if b is None else PackedText(b).values() for b in wire)
        return prompts, completions
    if kind == PACKED:
        return _unpack(zlib.decompress(data[1:]))
    if kind == ZLIB:
        data = zlib.decompress(data[1:])
    elif kind == RAW:
        data = data[1:]
    else:
        raise ValueError(f"unknown sample text format {kind!r}")
    prompts, completions = msgpack.unpackb(data, raw=False)
    return prompts, completions


def _unpack(payload: bytes) -> Texts:
    n, has, index, lengths, text = msgpack.unpackb(payload, raw=False)
    sizes = np.frombuffer(lengths, "<i4").astype(np.int64)
    ends = np.cumsum(sizes)
    joined = text.decode("utf-8", "surrogatepass")
    strings: list[str | None] = list(map(joined.__getitem__, map(
        slice, (ends - sizes).tolist(), ends.tolist())))
    strings.append(None)  # index -1: this sample has no such text
    values = list(map(strings.__getitem__, np.frombuffer(index, "<i4").tolist()))
    out: list[Column] = []
    for present in has:
        out.append(values[:n] if present else None)
        values = values[n:] if present else values
    return out[0], out[1]


def run_bytes(run_id: int) -> int:
    """UTF-8 bytes of sample text the run holds."""
    with connection.cursor() as cur:
        cur.execute("SELECT nbytes FROM ingest_sampletextusage WHERE run_id = %s", [run_id])
        row = cur.fetchone()
    return int(row[0]) if row else 0


def step_texts(run_id: int, step: int) -> dict[str, tuple[int, Texts]]:
    """The texts of one step of a run, per message id: (samples, (prompts, completions))."""
    with connection.cursor() as cur:
        cur.execute("SELECT msg_id, n, data FROM ingest_sampletext WHERE run_id = %s"
                    " AND step = %s", [run_id, step])
        rows = cur.fetchall()
    return {msg_id: (n, decode(data)) for msg_id, n, data in rows}
