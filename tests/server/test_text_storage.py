"""Sample text blobs (ingest.core.texts): the packed payload written as zstd (a large text
in pieces compressed at once, one frame each), or uncompressed when the text does not shrink,
in the message's transaction; rows of every earlier format (zlib-packed, as migration 0010 and
the code after it wrote them, and the msgpack rows before it) still read, next to new ones,
through the samples API. Runs on SQLite and, with DATABASE_URL, PostgreSQL.
"""

from __future__ import annotations

import importlib
import os
import threading
import zlib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import msgpack
import pytest
import zstandard
from django.db import connection
from django.test import Client

from ingest.core import texts
from ingest.models import Project, Run, SampleBatch, SampleText
from ingest.write.frames import handle_object

UNICODE = ["Ünïcode ✓", "emoji 😀🎉 and 𝔘", "", "e\u0301 combining", "中文 текст", "\x00nul\ttab\n"]
PROMPTS: list[str | None] = [*UNICODE, None, "shared", "shared", "lone \ud800 surrogate"]
COMPLETIONS: list[str | None] = [None, "", "shared", *reversed(UNICODE[:4]), None, "x" * 5000,
                                 "the end"]
WORDS = "the answer is therefore the sum of the values we check at each step because".split()

migration_0010 = importlib.import_module("ingest.migrations.0010_sample_text_packed")


def english(n: int, seed: int) -> str:
    return f"{seed}: " + " ".join(WORDS[(i * 7 + seed * 3 + i // 5) % len(WORDS)]
                                  for i in range(n))


def payload_of(blob: bytes) -> bytes:
    """The packed msgpack payload inside a blob of any packed format."""
    kind, body = blob[:1], blob[1:]
    if kind == texts.ZSTD:  # one or more frames
        return zstandard.ZstdDecompressor().decompressobj(read_across_frames=True).decompress(body)
    if kind == texts.PACKED:
        return zlib.decompress(body)
    assert kind == texts.STORED
    return body


def frames_in(blob: bytes) -> int:
    """How many zstd frames a ZSTD blob holds."""
    count, rest = 0, blob[1:]
    while rest:
        obj = zstandard.ZstdDecompressor().decompressobj()
        obj.decompress(rest)
        count, rest = count + 1, obj.unused_data
    return count


def test_texts_are_written_as_one_zstd_frame_and_read_back_exactly() -> None:
    nbytes, blob = texts.pack((PROMPTS, COMPLETIONS)) or (0, b"")
    assert blob[:1] == texts.ZSTD and frames_in(blob) == 1
    assert texts.decode(blob) == (PROMPTS, COMPLETIONS)
    assert texts.decode(memoryview(blob)) == (PROMPTS, COMPLETIONS)  # PostgreSQL's bytea
    assert nbytes == sum(len(v.encode("utf-8", "surrogatepass"))
                         for v in [*PROMPTS, *COMPLETIONS] if v is not None)
    n, has, _, _, text = msgpack.unpackb(payload_of(blob), raw=False)
    assert (n, has) == (len(PROMPTS), [True, True])
    assert text.count(b"shared") == 1  # each distinct string once
    _, only = texts.pack((None, COMPLETIONS)) or (0, b"")
    assert texts.decode(only) == (None, COMPLETIONS)


@pytest.mark.parametrize("size", [0, 1, 255, 256, 65535, 65536, 300_000])
def test_the_payload_is_the_packed_msgpack_array_whatever_the_texts_size(size: int) -> None:
    cols: tuple[list[str | None], None] = (["é" * (size // 2) + "x" * (size % 2), None], None)
    _, blob = texts.pack(cols) or (0, b"")
    payload = payload_of(blob)
    fields = msgpack.unpackb(payload, raw=False)
    assert len(fields[4]) == size
    assert payload == msgpack.packb(fields, use_bin_type=True)  # byte for byte
    assert texts.decode(blob) == cols


def test_english_like_text_compresses_at_least_as_well_as_the_zlib_rows_did() -> None:
    completions: list[str | None] = [english(300, i) for i in range(64)]
    _, blob = texts.pack((None, completions)) or (0, b"")
    payload = payload_of(blob)
    assert blob[:1] == texts.ZSTD and len(blob) < len(payload) / 3
    assert len(blob) <= len(zlib.compress(payload, 1))


@pytest.mark.parametrize("helpers", [0, 1, 2])
def test_a_large_text_is_compressed_in_pieces_at_once(helpers: int,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    pool = ThreadPoolExecutor(helpers) if helpers else None
    monkeypatch.setattr(texts, "HELPERS", helpers)
    monkeypatch.setattr(texts, "_helper", lambda: pool)
    completions: list[str | None] = [english(2000, i) for i in range(80)]  # ~900 KB
    prompts: list[str | None] = [f"prompt {i // 8} " * 40 for i in range(80)]
    try:
        nbytes, blob = texts.pack((prompts, completions)) or (0, b"")
    finally:
        if pool:
            pool.shutdown()
    assert nbytes > 3 * texts.SPLIT and blob[:1] == texts.ZSTD
    assert frames_in(blob) == helpers + 1  # one piece per thread, each of SPLIT bytes or more
    assert texts.decode(blob) == (prompts, completions)
    payload = payload_of(blob)
    assert payload == msgpack.packb(msgpack.unpackb(payload), use_bin_type=True)
    assert len(blob) < len(payload) / 3


def test_with_every_helper_busy_the_ingest_thread_compresses_both_halves(
        monkeypatch: pytest.MonkeyPatch) -> None:
    release = threading.Event()
    pool = ThreadPoolExecutor(1)
    monkeypatch.setattr(texts, "HELPERS", 1)
    monkeypatch.setattr(texts, "_helper", lambda: pool)
    busy = pool.submit(release.wait, 30)  # the one helper thread, taken
    try:
        completions: list[str | None] = [english(2000, i) for i in range(64)]
        _, blob = texts.pack((None, completions)) or (0, b"")
        assert frames_in(blob) == 2 and not busy.done()  # done without waiting for it
        assert texts.decode(blob) == (None, completions)
    finally:
        release.set()
        pool.shutdown()


def test_text_that_does_not_shrink_is_stored_uncompressed() -> None:
    _, blob = texts.pack((["ab"], None)) or (0, b"")  # the frame's header outweighs the gain
    assert blob[:1] == texts.STORED
    assert texts.decode(blob) == (["ab"], None)
    noise = os.urandom(1 << 20)  # a large payload: its probe says "no", nothing else is tried
    assert texts.compress(noise) == texts.STORED + noise
    packed = msgpack.packb([1, [True, False], b"\0\0\0\0", b"\2\0\0\0", b"hi"], use_bin_type=True)
    assert texts.decode(texts.compress(packed)) == (["hi"], None)


def test_compressing_from_several_threads_at_once_keeps_each_blob_its_own() -> None:
    cols = [([english(200, i)] * 4, [english(100 + i, i + 1) for _ in range(4)])
            for i in range(16)]
    with ThreadPoolExecutor(4) as pool:
        blobs = list(pool.map(lambda c: (texts.pack(c) or (0, b""))[1], cols))
    assert [texts.decode(b) for b in blobs] == cols


def test_rows_of_the_earlier_formats_stay_readable() -> None:
    cols = (PROMPTS, COMPLETIONS)
    old = migration_0010._pack(cols)  # zlib-packed, as 0010 and the code after it wrote
    assert old[:1] == texts.PACKED
    assert texts.decode(old) == cols
    assert texts.decode(memoryview(old)) == cols
    plain = (PROMPTS[:-1], COMPLETIONS[:-1])  # (msgpack strings hold no lone surrogate)
    legacy = msgpack.packb(list(plain), use_bin_type=True)  # before 0010
    assert texts.decode(texts.RAW + legacy) == plain
    assert texts.decode(texts.ZLIB + zlib.compress(legacy)) == plain
    with pytest.raises(ValueError, match="unknown sample text format"):
        texts.decode(b"\x09")


# ---------------------------------------------------------------- in the database

db = pytest.mark.django_db(transaction=True)


@pytest.fixture
def project() -> Iterator[int]:
    yield Project.objects.create(name="p").pk


def samples(mid: str, step: int, n: int, **extra: Any) -> dict[str, Any]:
    return {"v": 1, "id": mid, "type": "samples", "run": "r", "step": step,
            "sample_id": [f"{mid}-{i}" for i in range(n)], "group_id": [i // 4 for i in range(n)],
            "reward": [float(i) for i in range(n)], **extra}


@db
def test_an_old_zlib_row_and_a_new_zstd_row_are_read_together(project: int) -> None:
    prompts, completions = PROMPTS[:-1], COMPLETIONS[:-1]  # JSON holds no lone surrogate
    n = len(prompts)
    ack = handle_object(project, samples("new", 3, n, prompt=prompts, completion=completions))
    assert ack.reply == {"type": "ack", "id": "new"}
    handle_object(project, samples("old", 3, n))  # its batch; its text written the old way
    run = Run.objects.get(name="r")
    old_cols = (completions, prompts)
    with connection.cursor() as cur:
        cur.execute("INSERT INTO ingest_sampletext (run_id, step, msg_id, n, nbytes, data)"
                    " VALUES (%s, %s, %s, %s, %s, %s)",
                    [run.pk, 3, "old", n, 1, migration_0010._pack(old_cols)])
    kinds = {r.msg_id: bytes(r.data)[:1] for r in SampleText.objects.all()}
    assert kinds == {"new": texts.ZSTD, "old": texts.PACKED}
    assert texts.step_texts(run.pk, 3) == {"new": (n, (prompts, completions)),
                                           "old": (n, old_cols)}
    body = Client().get(f"/api/runs/{run.pk}/samples",
                        {"step": 3, "text": 1, "limit": 100}).json()
    got = {s["sample_id"]: (s["prompt"], s["completion"]) for s in body["samples"]}
    assert [got[f"new-{i}"] for i in range(n)] == list(zip(prompts, completions, strict=True))
    assert [got[f"old-{i}"] for i in range(n)] == list(zip(*old_cols, strict=True))


@db
def test_a_stored_row_of_text_that_does_not_shrink_reads_back(project: int) -> None:
    ack = handle_object(project, samples("m", 0, 2, prompt=["ab", None]))
    assert ack.reply == {"type": "ack", "id": "m"}
    [row] = SampleText.objects.all()
    assert bytes(row.data)[:1] == texts.STORED and row.nbytes == 2
    assert texts.step_texts(row.run_id, 0) == {"m": (2, (["ab", None], None))}


@db
def test_text_that_cannot_be_stored_leaves_nothing_of_its_message(
        project: int, monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(*_: bytes) -> bytes:
        raise RuntimeError("compression failed")

    handle_object(project, samples("first", 0, 2, prompt=["a", "b"]))
    monkeypatch.setattr(texts, "compress", fail)
    with pytest.raises(RuntimeError):  # no ack: the transport fails the frame, the client resends
        handle_object(project, samples("second", 1, 2, prompt=["c", "d"]))
    assert set(SampleText.objects.values_list("msg_id", flat=True)) == {"first"}
    assert set(SampleBatch.objects.values_list("msg_id", flat=True)) == {"first"}
    monkeypatch.undo()
    ack = handle_object(project, samples("second", 1, 2, prompt=["c", "d"]))  # not a duplicate
    assert ack.reply == {"type": "ack", "id": "second"}
    assert texts.step_texts(Run.objects.get(name="r").pk, 1) == {"second": (2, (["c", "d"], None))}
