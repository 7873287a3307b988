"""Sample text storage (ingest.core.texts): one packed, compressed row per (message, step) — the
step's distinct strings concatenated, their lengths and each sample's index — read back exactly
(unicode, empty and missing texts, a prompt shared by a group stored once), counted per sample
against the limits, and migration 0010 converting rows of the earlier msgpack format.
Runs on SQLite and, with DATABASE_URL, PostgreSQL.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator, Sequence
from typing import Any

import msgpack
import numpy as np
import pytest
import zstandard
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test import Client, override_settings

from ingest.core import texts
from ingest.models import Project, Run, SampleBatch, SampleText
from ingest.write.frames import handle_object, handle_objects
from trainer_hooks.wire import protocol as p
from trainer_hooks.wire.texts import TEXT

pytestmark = pytest.mark.django_db(transaction=True)

UNICODE = ["Ünïcode ✓", "emoji 😀🎉 and 𝔘", "", "e\u0301 combining", "中文 текст", "\x00nul\ttab\n"]


@pytest.fixture
def project() -> Iterator[int]:
    yield Project.objects.create(name="p").pk


def msg(mid: str, step: Any, n: int, **extra: Any) -> dict[str, Any]:
    return {"v": 1, "id": mid, "type": "samples", "run": "r", "step": step,
            "sample_id": [f"{mid}-{i}" for i in range(n)], "group_id": [i // 4 for i in range(n)],
            "reward": [float(i) for i in range(n)], **extra}


def api_texts(step: int) -> dict[str, tuple[Any, Any]]:
    rid = Run.objects.get(name="r").pk
    body = Client().get(f"/api/runs/{rid}/samples", {"step": step, "text": 1}).json()
    return {s["sample_id"]: (s["prompt"], s["completion"]) for s in body["samples"]}


def utf8(values: Sequence[str | None]) -> int:
    return sum(len(v.encode("utf-8", "surrogatepass")) for v in values if v is not None)


def test_pack_round_trips_unicode_empty_missing_and_repeated_texts() -> None:
    prompts: list[str | None] = [*UNICODE, None, "shared", "shared", "lone \ud800 surrogate"]
    completions: list[str | None] = [None, "", "shared", *reversed(UNICODE[:4]), None, "x" * 5000]
    packed = texts.pack((prompts, completions))
    assert packed is not None
    nbytes, blob = packed
    assert nbytes == utf8(prompts) + utf8(completions)  # each sample counted, repeats too
    assert blob[:1] == texts.ZSTD
    assert texts.decode(blob) == (prompts, completions)
    _, only = texts.pack((None, completions)) or (0, b"")
    assert texts.decode(only) == (None, completions)
    assert texts.pack((None, None)) is None
    assert texts.pack(([None, None], [None, None])) is None  # no sample has text


def test_a_groups_shared_prompt_is_stored_once_and_read_by_every_sample(project: int) -> None:
    prompt = "Solve: " + "two plus two " * 300
    prompts = [prompt] * 8
    completions = [f"answer {i} " * (50 + i) for i in range(8)]
    [ack] = [handle_object(project, msg("m", 0, 8, prompt=prompts, completion=completions)).reply]
    assert ack == {"type": "ack", "id": "m"}
    [row] = SampleText.objects.all()
    assert row.nbytes == utf8(prompts) + utf8(completions) == texts.run_bytes(row.run_id)
    payload = msgpack.unpackb(zstandard.decompress(bytes(row.data)[1:]), raw=False)
    assert len(payload[4]) == utf8([prompt]) + utf8(completions)  # the prompt once
    got = api_texts(0)
    assert [got[f"m-{i}"] for i in range(8)] == list(zip(prompts, completions, strict=True))


def test_unicode_empty_and_missing_texts_over_the_wire(project: int) -> None:
    n = len(UNICODE)
    prompts = [*UNICODE[1:], None]
    handle_object(project, msg("a", 3, n, prompt=prompts, completion=UNICODE))
    handle_object(project, msg("b", 3, 2, completion=[None, "only completion"]))
    handle_object(project, msg("c", 3, 2))  # no text at all: no row
    got = api_texts(3)
    assert [got[f"a-{i}"] for i in range(n)] == list(zip(prompts, UNICODE, strict=True))
    assert (got["b-0"], got["b-1"]) == ((None, None), (None, "only completion"))
    assert got["c-0"] == got["c-1"] == (None, None)
    assert sorted(SampleText.objects.values_list("msg_id", flat=True)) == ["a", "b"]


def test_a_message_over_steps_counts_each_steps_bytes(project: int) -> None:
    steps = [2, 1, 2, 1, 2, 1]
    prompts = ["été", None, "été", "ab", "", "ab"]
    handle_object(project, msg("m", steps, 6, prompt=prompts))
    rows = dict(SampleText.objects.values_list("step", "nbytes"))
    assert rows == {1: utf8(["ab", "ab"]), 2: utf8(["été", "été", ""])}
    assert texts.run_bytes(Run.objects.get(name="r").pk) == utf8(prompts)
    got = {**api_texts(1), **api_texts(2)}
    assert [got[f"m-{i}"][0] for i in range(6)] == prompts


@override_settings(TELESCOPE_MAX_TEXT_BYTES_PER_RUN=1000)
def test_the_run_limit_counts_every_samples_text_not_the_stored_bytes(project: int) -> None:
    shared = ["p" * 100] * 8  # 800 bytes counted, though stored once and compressed
    first = handle_object(project, msg("a", 0, 8, prompt=shared)).reply
    second = handle_object(project, msg("b", 1, 8, prompt=shared)).reply
    assert "left_out" not in first and set(second["left_out"]) == {"prompt"}
    assert texts.run_bytes(Run.objects.get(name="r").pk) == 800


@override_settings(TELESCOPE_MAX_TEXT_BYTES_PER_MESSAGE=100)
def test_the_message_limit_is_unchanged(project: int) -> None:
    ok = handle_object(project, msg("a", 0, 2, prompt=["é" * 25, "x" * 50])).reply  # 100 bytes
    bad = handle_object(project, msg("b", 0, 2, prompt=["é" * 25, "x" * 51])).reply
    assert ok == {"type": "ack", "id": "a"}
    assert bad["type"] == "error" and bad["field"] == "prompt" and bad["code"] == "too_large"
    assert p.text_limit() == 100


def migrate(target: str | None = None) -> None:
    """To `target`, or to the latest migration (a test that went back leaves the schema as
    every other test expects it)."""
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate([("ingest", target)] if target else
                     executor.loader.graph.leaf_nodes("ingest"))


def test_migration_0010_converts_rows_of_the_earlier_format(project: int) -> None:
    handle_object(project, msg("x", 9, 1))  # the run
    run = Run.objects.get(name="r")
    prompts: list[str | None] = [*UNICODE, None]
    completions: list[str | None] = [None, *UNICODE]
    legacy: dict[int, tuple[bytes, list[Any]]] = {  # step: (format byte, texts): raw as a
        # crash left it, and zlib-compressed
        0: (texts.RAW, [prompts, None]),
        1: (texts.ZLIB, [prompts, completions]),
        2: (texts.ZLIB, [None, completions]),
    }
    migrate("0009_point_blocks")
    try:
        with connection.cursor() as cur:
            for step, (kind, cols) in legacy.items():
                packed = msgpack.packb(cols, use_bin_type=True)
                data = kind + (zlib.compress(packed) if kind == texts.ZLIB else packed)
                cur.execute("INSERT INTO ingest_sampletext (run_id, step, msg_id, n, nbytes,"
                            " compressed, data) VALUES (%s, %s, %s, %s, %s, %s, %s)",
                            [run.pk, step, f"m{step}", len(prompts), 7, kind == texts.ZLIB,
                             data])
    finally:
        migrate()  # through 0010_sample_text_packed, which converts them
    rows = SampleText.objects.order_by("step")
    assert [r.step for r in rows] == [0, 1, 2] and {r.nbytes for r in rows} == {7}
    for row in rows:
        assert bytes(row.data)[:1] == texts.PACKED
        assert texts.decode(bytes(row.data)) == tuple(legacy[row.step][1])
    assert texts.step_texts(run.pk, 1) == {"m1": (len(prompts), (prompts, completions))}


def test_rows_of_the_earlier_format_stay_readable() -> None:
    cols = [["a", None, "ü"], None]
    packed = msgpack.packb(cols, use_bin_type=True)
    assert texts.decode(texts.RAW + packed) == tuple(cols)
    assert texts.decode(texts.ZLIB + zlib.compress(packed)) == tuple(cols)
    with pytest.raises(ValueError, match="unknown sample text format"):
        texts.decode(b"\x09")


def sent(obj: dict[str, Any]) -> Any:
    """A message as trainer_hooks puts it on the wire (text columns packed), decoded."""
    return p.decode_frame(p.encode_msgpack(obj), binary=True)


def test_packed_text_is_stored_as_it_came_and_reads_back(project: int) -> None:
    n = len(UNICODE)
    prompts = ["the group's prompt"] * n
    frame = p.encode_msgpack(msg("a", 3, n, prompt=prompts, completion=UNICODE))
    decoded = p.decode_frame(frame, binary=True)
    assert handle_object(project, decoded).reply == {"type": "ack", "id": "a"}
    blob = bytes(SampleText.objects.get(msg_id="a").data)
    assert blob[:1] == texts.WIRE  # the sender's compressed columns, not recompressed
    _, prompt_sent, completion_sent = msgpack.unpackb(blob[1:])
    assert (prompt_sent, completion_sent) == (decoded["prompt"].data, decoded["completion"].data)
    got = api_texts(3)
    assert [got[f"a-{i}"] for i in range(n)] == list(zip(prompts, UNICODE, strict=True))
    assert texts.run_bytes(Run.objects.get(name="r").pk) == utf8(prompts) + utf8(UNICODE)


def test_packed_text_over_several_steps_or_beside_a_list_is_stored_per_step(project: int
                                                                           ) -> None:
    steps = [2, 1, 2, 1, 2, 1]
    prompts = ["été", None, "été", "ab", "", "ab"]
    handle_object(project, sent(msg("m", steps, 6, prompt=prompts)))
    rows = dict(SampleText.objects.values_list("step", "nbytes"))
    assert rows == {1: utf8(["ab", "ab"]), 2: utf8(["été", "été", ""])}
    got = {**api_texts(1), **api_texts(2)}
    assert [got[f"m-{i}"][0] for i in range(6)] == prompts
    handle_object(project, sent(msg("none", 6, 2, prompt=[None, None])))  # no text: no row
    assert not SampleText.objects.filter(msg_id="none").exists()
    mixed = sent(msg("x", 5, 2, prompt=["packed", None]))
    mixed["completion"] = ["a list", "of strings"]  # another client may mix the two forms
    handle_object(project, mixed)
    assert bytes(SampleText.objects.get(msg_id="x").data)[:1] in (texts.ZSTD, texts.STORED)
    got = api_texts(5)
    assert (got["x-0"], got["x-1"]) == (("packed", "a list"), (None, "of strings"))


def test_packed_text_found_bad_while_storing_undoes_only_its_message(project: int) -> None:
    """The text of a packed column is checked while the message's other columns are stored
    (trainer_hooks.wire.texts): one that is not UTF-8 gets an error naming the field, and
    nothing of its message stays — its samples neither — while the batch's others are stored."""
    noise = bytes(np.random.default_rng(1).integers(32, 127, 300_000, dtype=np.uint8))
    frame = zstandard.ZstdCompressor(write_content_size=True).compress(noise + b"\xff")
    bad = msg("bad", 7, 2)
    bad["completion"] = msgpack.ExtType(TEXT, msgpack.packb([
        np.array([0, 1], "<i4").tobytes(), np.array([len(noise), 1], "<i4").tobytes(), frame]))
    good = msg("good", 7, 2, completion=["fine", "also fine"])
    good_sent = msgpack.unpackb(p.encode_msgpack(good))  # its text packed, as ExtType
    batch = p.decode_frame(msgpack.packb([good_sent, bad]), binary=True)
    replies = [o.reply for o in handle_objects(project, batch)]
    assert replies[0] == {"type": "ack", "id": "good"}
    assert (replies[1]["type"], replies[1]["code"], replies[1]["field"]) == (
        "error", "invalid", "completion") and "UTF-8" in replies[1]["message"]
    assert set(SampleBatch.objects.values_list("msg_id", flat=True)) == {"good"}
    assert set(SampleText.objects.values_list("msg_id", flat=True)) == {"good"}
    assert api_texts(7) == {"good-0": (None, "fine"), "good-1": (None, "also fine")}
