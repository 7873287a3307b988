"""Packed text columns on the wire (trainer_hooks.wire.texts, docs/protocol.md "Packed text"):
what the sender packs reads back exactly; the validator counts each sample's bytes against the
message limit and refuses, naming the field, every malformed column — before decompressing
one that says it holds more than the limit allows."""

from __future__ import annotations

from typing import Any

import msgpack
import numpy as np
import pytest
import zstandard

from trainer_hooks.wire import protocol as p
from trainer_hooks.wire import texts
from trainer_hooks.wire.texts import TEXT, PackedError, PackedText, TextColumn, pack

VALUES: list[str | None] = ["Ünïcode ✓", None, "", "emoji 😀🎉", "shared", "shared",
                            "\x00nul\ttab\n", "中文 текст", None, "x" * 5000]


def frame(**text: Any) -> bytes:
    n = len(next(iter(text.values())))
    msg = {"v": 1, "id": "m", "type": "samples", "run": "r", "step": 0,
           "sample_id": list(range(n)), "group_id": [0] * n, "reward": [1.0] * n}
    return p.encode_msgpack({**msg, **text})


def validate(data: bytes) -> p.Samples:
    got = p.validate_message(p.decode_frame(data, binary=True))
    assert isinstance(got, p.Samples)
    return got


def refused(ext: bytes, n: int = 2) -> p.ProtocolError:
    """The error of a samples message whose completion column is `ext`: from validation (its
    structure), or from the check of its text (`TextColumn.text()`, which the server waits for
    before the message's commit: ingest.write.store)."""
    msg = {"v": 1, "id": "m", "type": "samples", "run": "r", "step": 0,
           "sample_id": list(range(n)), "group_id": [0] * n, "reward": [1.0] * n,
           "completion": msgpack.ExtType(TEXT, ext)}
    try:
        got = validate(msgpack.packb(msg))
    except p.ProtocolError as exc:
        return exc
    with pytest.raises(p.ProtocolError) as exc:
        p.check_text(got)  # what the server waits for before the message's commit
    return exc.value


def payload(index: list[int], lengths: list[int], text: bytes, *, sized: bool = True) -> bytes:
    frame = zstandard.ZstdCompressor(write_content_size=sized).compress(text)
    return msgpack.packb([np.array(index, "<i4").tobytes(), np.array(lengths, "<i4").tobytes(),
                          frame])


def test_the_sender_packs_text_columns_and_they_read_back_exactly() -> None:
    data = frame(prompt=VALUES, completion=list(reversed(VALUES)))
    raw = msgpack.unpackb(data, raw=False)
    assert isinstance(raw["prompt"], msgpack.ExtType) and raw["prompt"].code == TEXT
    got = validate(data)
    assert isinstance(got.prompt, TextColumn) and isinstance(got.completion, TextColumn)
    assert got.prompt.values() == VALUES and got.completion.values() == list(reversed(VALUES))
    each = sum(len(v.encode()) for v in VALUES if v is not None)
    assert got.text_bytes == 2 * each  # every sample counted, a repeated string too
    assert got.prompt.lengths.size == 7  # "shared" once
    # the sender reads its own messages back as lists (to split one the server refused)
    assert p.decode(data, "msgpack")["prompt"] == VALUES


def test_ascii_text_and_a_column_of_nulls_read_back() -> None:
    ascii_ = [f"line {i}\n" * i for i in range(50)]
    got = validate(frame(prompt=ascii_, completion=[None] * 50))
    assert isinstance(got.prompt, TextColumn) and isinstance(got.completion, TextColumn)
    assert got.prompt.values() == ascii_ and got.completion.values() == [None] * 50


def test_packed_text_counts_against_the_message_limit_naming_the_field() -> None:
    limit = p.text_limit()
    try:
        p.set_text_limit(100)
        ok = validate(frame(prompt=["é" * 25, "x" * 50]))  # 100 bytes
        assert ok.text_bytes == 100
        with pytest.raises(p.ProtocolError) as exc:
            validate(frame(prompt=["é" * 25, "x" * 40], completion=["y" * 11, None]))
        assert (exc.value.code, exc.value.field) == ("too_large", "completion")
        # a column whose text is larger than the limit is refused before it is decompressed
        bomb = payload([0, 0], [1 << 24], zstandard.ZstdCompressor().compress(b"\0" * (1 << 24)))
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(texts, "_dctx", lambda: pytest.fail("decompressed"))
            err = refused(bomb)
        assert (err.code, err.field) == ("too_large", "completion")
    finally:
        p.set_text_limit(limit)


@pytest.mark.parametrize("ext, why", [
    (b"\xc1not msgpack", "does not decode"),
    (msgpack.packb({b"a": b"", b"b": b"", b"c": b""}), "three byte strings"),
    (msgpack.packb([b"", b"", 3]), "three byte strings"),
    (payload([0], [1], b"a"), "index 2 samples"),
    (payload([0, 1], [1], b"a"), "does not hold"),
    (payload([0, -2], [1], b"a"), "does not hold"),
    (payload([0, 0], [-1, 2], b"a"), "negative"),
    (payload([0, 0], [1, 5], b"abcdef"), "more text than its samples"),
    (msgpack.packb([np.zeros(2, "<i4").tobytes(), np.array([2], "<i4").tobytes(),
                    zstandard.ZstdCompressor(write_content_size=True).compress(b"ab")
                    + b"rides along"]), "unused data"),
    (msgpack.packb([np.zeros(2, "<i4").tobytes(), np.array([2000], "<i4").tobytes(),
                    zstandard.ZstdCompressor(write_content_size=True).compress(b"a" * 2000)
                    + b"\0" * 100]), "unused data"),
    (msgpack.packb([np.full(2, -1, "<i4").tobytes(), b"",
                    zstandard.ZstdCompressor(write_content_size=True).compress(b"")
                    + b"x" * 100]), "larger than its text"),
    (payload([0, 0], [2], b"ab", sized=False), "records its size"),
    (payload([0, 0], [3], b"ab"), "records its size"),
    (msgpack.packb([np.zeros(2, "<i4").tobytes(), np.array([2], "<i4").tobytes(),
                    b"\x28\xb5\x2f\xfd\x20\x02junk"]), "does not decompress"),
    (payload([0, 0], [2], b"\xff\xfe"), "UTF-8"),
    (payload([0, 1], [1, 1], "é".encode()), "cuts a character"),
])
def test_a_malformed_packed_column_is_refused_naming_the_field(ext: bytes, why: str) -> None:
    err = refused(ext)
    assert (err.code, err.field) == ("invalid", "completion")
    assert why in str(err), str(err)


def test_a_checked_columns_values_are_its_strings() -> None:
    column = PackedText(pack(["a", None, "b"])).unpack(3, 100)
    assert column.values() == ["a", None, "b"] and column.nbytes == 2
    for values in ([None, None], ["", ""], []):  # no text at all, or none to compress
        empty = PackedText(pack(values)).unpack(len(values), 100)
        assert empty.values() == values and empty.nbytes == 0


@pytest.mark.parametrize("on_helper", [True, False])
def test_a_large_texts_check_runs_on_a_helper_thread_and_fails_when_asked(
        on_helper: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Validation checks the structure; the text (decompressed, UTF-8) is checked on a helper
    thread when large, and its problem raised by `text()`, whichever thread found it."""
    if not on_helper:
        monkeypatch.setattr(texts, "ASYNC_BYTES", 1 << 40)
    elif texts._pool() is None:
        pytest.skip("one core: no helper thread")
    noise = bytes(np.random.default_rng(0).integers(32, 127, 200_000, dtype=np.uint8))
    big = noise + b"\xff"  # ASCII that hardly compresses, then a byte that is not UTF-8
    lengths = [len(noise), 1]
    frame = zstandard.ZstdCompressor(write_content_size=True).compress(big)
    assert len(frame) >= texts.ASYNC_BYTES or not on_helper
    column = PackedText(msgpack.packb([np.array([0, 1], "<i4").tobytes(),
                                       np.array(lengths, "<i4").tobytes(), frame])
                        ).unpack(2, 1 << 20)
    assert (column._pending is not None) == on_helper
    with pytest.raises(PackedError, match="UTF-8"):
        column.text()
